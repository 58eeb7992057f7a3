package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token file is read again when it changes: a rotation adds the new
// token beside the old one, the clients move, the old one goes, and the
// replica never restarts. A file emptied by mistake leaves the last good
// tokens in use.
func TestTokenFileRotationWithoutRestart(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	dir := t.TempDir()
	file, adminFile := filepath.Join(dir, "token"), filepath.Join(dir, "admin-token")
	writeTo := func(file, s string) {
		t.Helper()
		// Replaced whole (a rename), as a Secret update or an editor does.
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write := func(s string) { t.Helper(); writeTo(file, s) }
	write("old-token\n")
	writeTo(adminFile, "old-admin\n")
	r := c.serveWith("a", "--http-token-file", file, "--http-admin-token-file", adminFile)
	status := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+r.addr+"/v1/sequences", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually(t, "the old token works", func() bool { return status("old-token") == http.StatusOK })
	if got := status("new-token"); got != http.StatusUnauthorized {
		t.Fatalf("new token before the rotation: %d", got)
	}
	write("old-token\nnew-token\n")
	eventually(t, "the new token works beside the old", func() bool { return status("new-token") == http.StatusOK })
	if got := status("old-token"); got != http.StatusOK {
		t.Fatalf("old token during the rotation: %d", got)
	}
	write("new-token\n")
	eventually(t, "the old token refused", func() bool { return status("old-token") == http.StatusUnauthorized })
	write("")
	eventually(t, "the empty file reported", func() bool {
		return strings.Contains(r.stderr.String(), "token file changed but not reloaded")
	})
	if got := status("new-token"); got != http.StatusOK {
		t.Fatalf("new token after the file was emptied: %d; want the last good tokens kept", got)
	}
	// The admin token file the same way (an admin token works on every
	// route); a taker's token in it is refused, the old ones kept.
	if got := status("old-admin"); got != http.StatusOK {
		t.Fatalf("old admin token: %d", got)
	}
	writeTo(adminFile, "new-admin\n")
	eventually(t, "the new admin token works", func() bool { return status("new-admin") == http.StatusOK })
	if got := status("old-admin"); got != http.StatusUnauthorized {
		t.Fatalf("old admin token after the rotation: %d", got)
	}
}
