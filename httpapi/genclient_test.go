package httpapi_test

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// A client generated from the OpenAPI document by an off-the-shelf
// generator (oapi-codegen, unedited) drives a real replica: it creates a
// sequence, takes and recycles IDs, lists and describes, reads the status,
// gets the documented errors, and deletes. The client is generated at test
// time into a temporary copy of testdata/apiuser, a module of its own that
// pins the generator; that module's test (testdata/apiuser/client_test.go)
// holds the assertions and runs against the replica through a proxy that
// validates every round trip against the document. A change to
// httpapi/openapi.json that the generator cannot digest fails here too.
func TestGeneratedClient(t *testing.T) {
	t.Parallel()
	bin := buildGeneratedClientTest(t)

	e := newEnv(t)
	svc := e.withPrimary()
	r := e.replica(httpapi.Options{Token: "taker", AdminToken: "admin", Admin: svc}, sequence.Options{CeilingWait: 5 * time.Second})
	target, err := url.Parse(r.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: apitest.NewTransport(t, r.ts.Client().Transport),
	})
	t.Cleanup(front.Close)

	cmd := exec.Command(bin, "-test.v", "-test.count=1")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), "SEQKEEPER_URL="+front.URL, "SEQKEEPER_TOKEN=taker", "SEQKEEPER_ADMIN_TOKEN=admin")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the generated client's test (testdata/apiuser/client_test.go): %v\n%s", err, out)
	}
}

// buildGeneratedClientTest copies testdata/apiuser into a temporary
// directory, generates the client into its genclient package with the
// generator its go.mod pins (go tool oapi-codegen, through the Go module
// proxy or the module cache), and compiles the module's test. It returns
// the test binary.
func buildGeneratedClientTest(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum", "oapi-codegen.yaml", "client_test.go"} {
		data, err := os.ReadFile(filepath.Join("testdata", "apiuser", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "genclient"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc, err := filepath.Abs("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "apiuser.test")
	for _, args := range [][]string{
		{"tool", "oapi-codegen", "-config", "oapi-codegen.yaml", doc},
		{"test", "-c", "-o", bin, "."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return bin
}
