package config

import (
	"strings"
	"testing"
)

// RedactURL shows what says where the store is and how it is encrypted
// (the endpoint, the region, the KMS key, which IAM guards, not secrecy)
// and hides everything else a URL could carry.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	got := RedactURL("s3://AKIA:SuperSecret123@ids/p?endpoint=http://u:SuperSecret123@minio:9000&region=eu-west-1&sse_kms_key_id=alias/ids&x=SuperSecret123")
	for _, want := range []string{"endpoint=http%3A%2F%2FREDACTED%40minio%3A9000", "region=eu-west-1", "sse_kms_key_id=alias%2Fids", "x=REDACTED"} {
		if !strings.Contains(got, want) {
			t.Errorf("RedactURL = %s; want it to hold %s", got, want)
		}
	}
	if strings.Contains(got, "SuperSecret123") {
		t.Errorf("RedactURL = %s shows the secret", got)
	}
}
