package main

import (
	stdlog "log"
	"strings"

	"github.com/rs/zerolog"
)

// httpErrorLog is the HTTP server's error log, into the replica's log. A
// TLS handshake that ends before it began ("EOF") is a client that
// connected and closed: the crash probe of the replica next in line
// (crash_probe), a load balancer's or Kubernetes' TCP check. It is logged
// at debug, four times a second otherwise; every other line at warn.
func httpErrorLog(log zerolog.Logger) *stdlog.Logger {
	return stdlog.New(httpLogWriter{log}, "", 0)
}

type httpLogWriter struct{ log zerolog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := zerolog.WarnLevel
	if strings.Contains(msg, "TLS handshake error") && strings.HasSuffix(msg, ": EOF") {
		level = zerolog.DebugLevel
	}
	w.log.WithLevel(level).Str("component", "http").Msg(msg)
	return len(p), nil
}
