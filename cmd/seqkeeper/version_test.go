package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "c0bce8532aef0123456789abcdef"}}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go install @version", debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, "v0.1.0"},
		{"a checkout (Go's pseudo-version)", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124225122-c0bce8532aef+dirty"}}, "v0.0.0-20261124225122-c0bce8532aef+dirty"},
		{"(devel) with a revision", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, "devel-c0bce8532aef"},
		{"(devel), modified", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "devel-c0bce8532aef-dirty"},
		{"nothing known", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
	} {
		if got := versionFrom(&tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// --version, version and the completion scripts need no configuration.
func TestVersionFlagAndCompletion(t *testing.T) {
	t.Parallel()
	run1 := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		g := &globals{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, lookupEnv: func(string) (string, bool) { return "", false }}
		code := run(context.Background(), g, args)
		return stdout.String(), stderr.String(), code
	}
	flag, _, code := run1("--version")
	cmd, _, code2 := run1("version")
	if code != 0 || code2 != 0 || flag != cmd || strings.TrimSpace(flag) != buildVersion() {
		t.Fatalf("--version %q (exit %d), version %q (exit %d); want both %q", flag, code, cmd, code2, buildVersion())
	}
	for shell, marker := range map[string]string{
		"bash": "complete -o default -F __start_seqkeeper seqkeeper",
		"zsh":  "#compdef seqkeeper",
		"fish": "complete -c seqkeeper",
	} {
		out, errOut, code := run1("completion", shell)
		if code != 0 || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d, stderr %q, no %q in %d bytes", shell, code, errOut, marker, len(out))
		}
	}
	// A shell cobra cannot complete, or none: a usage error (exit 2),
	// not the help with exit 0.
	for _, args := range [][]string{{"completion", "tcsh"}, {"completion"}} {
		out, errOut, code := run1(args...)
		if code != 2 || !strings.Contains(errOut, "bash, zsh, fish") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming the shells", args, code, out, errOut)
		}
	}
	// version -o json (and yaml) print the version as data.
	out, errOut, code := run1("version", "-o", "json")
	var v struct{ Version, Go string }
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version != buildVersion() || v.Go == "" {
		t.Errorf("version -o json: exit %d, %q %q", code, out, errOut)
	}
	if out, _, code := run1("version", "-o", "yaml"); code != 0 || !strings.HasPrefix(out, "version: ") {
		t.Errorf("version -o yaml: exit %d, %q", code, out)
	}
	if _, errOut, code := run1("version", "-o", "xml"); code != 2 || !strings.Contains(errOut, "want text, json or yaml") {
		t.Errorf("version -o xml: exit %d, %q", code, errOut)
	}

	// What the shells call while completing: subcommands by prefix.
	out, errOut, code = run1("__complete", "desc")
	if code != 0 || !strings.Contains(out, "describe") {
		t.Fatalf("__complete desc: exit %d, %q %q", code, out, errOut)
	}
}
