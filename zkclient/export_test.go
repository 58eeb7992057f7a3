package zkclient

// SrvrMode exposes the srvr fallback of DetectMode to the external tests,
// which need real servers from internal/testenv (which imports zkclient).
var SrvrMode = srvrMode
