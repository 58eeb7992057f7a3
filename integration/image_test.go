package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// TestImageTalksHTTPSToS3 runs the seqkeeper image as it ships against a
// MinIO that serves HTTPS with a certificate of a private CA: trusted
// through the image's CA bundle (the path real S3's certificates are checked
// against), serve writes its ceilings over HTTPS and hands out IDs; without
// the CA the store is refused, and the log says why. The image also runs as
// an unprivileged user and carries its OCI labels.
func TestImageTalksHTTPSToS3(t *testing.T) {
	takeClusterSlot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// One ZooKeeper in quorum mode, as serve requires.
	c := NewCluster(ctx, t, Options{ZooKeepers: 1, ZooKeeperEnv: map[string]string{"ZOO_STANDALONE_ENABLED": "false"}})

	ca := testenv.NewCA(t, "seqkeeper test CA")
	certPEM, keyPEM := ca.Issue(t, x509.ExtKeyUsageServerAuth, "minio", "localhost")
	minio, err := c.start(ctx, "minio", MinIOImage, []string{MinIOPort},
		testcontainers.WithCmd("server", "/data", "--certs-dir", "/certs"),
		testcontainers.WithEnv(map[string]string{"MINIO_ROOT_USER": MinIOUser, "MINIO_ROOT_PASSWORD": MinIOPassword}),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{Reader: bytes.NewReader(certPEM), ContainerFilePath: "/certs/public.crt", FileMode: 0o644},
			testcontainers.ContainerFile{Reader: bytes.NewReader(keyPEM), ContainerFilePath: "/certs/private.key", FileMode: 0o600},
		),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute, wait.ForHTTP("/minio/health/live").WithPort(MinIOPort).
			WithTLS(true, &tls.Config{RootCAs: ca.Pool(), ServerName: "minio"})),
	)
	if err != nil {
		t.Fatal(err)
	}

	img, err := c.docker.ImageInspect(ctx, SeqkeeperImage)
	if err != nil {
		t.Fatal(err)
	}
	if u := img.Config.User; u == "" || u == "root" || strings.HasPrefix(u, "0") {
		t.Errorf("image user %q: want an unprivileged one", u)
	}
	for _, l := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.licenses"} {
		if _, ok := img.Config.Labels[l]; !ok {
			t.Errorf("image has no label %s", l)
		}
	}

	hostBundle, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("the host's CA bundle (scripts/images.sh copies it into the image): %v", err)
	}
	store := "s3://" + StoreBucket + "/tls?endpoint=https://minio:" + portNumber(MinIOPort) + "&region=us-east-1"
	env := map[string]string{"SEQKEEPER_STORE": store}

	t.Run("without the CA the store is refused", func(t *testing.T) {
		r, err := c.AddReplicaWith(ctx, []string{"serve"},
			testcontainers.WithEnv(env),
			testcontainers.WithWaitStrategyAndDeadline(2*time.Minute, wait.ForLog("certificate signed by unknown authority")),
		)
		if err != nil {
			t.Fatalf("serve without the CA never said why HTTPS failed: %v", err)
		}
		// The image ships a real CA bundle, for real S3.
		rc, err := r.Container.CopyFileFromContainer(ctx, "/etc/ssl/certs/ca-certificates.crt")
		if err != nil {
			t.Fatalf("the image's CA bundle: %v", err)
		}
		shipped := x509.NewCertPool()
		if !shipped.AppendCertsFromPEM([]byte(readAll(rc))) {
			t.Fatal("the image's CA bundle holds no certificates")
		}
		rc.Close()
		logs, _ := r.Logs(ctx)
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "certificate signed by unknown authority") {
				t.Logf("serve says: %s", l)
				break
			}
		}
		resp, err := http.Get("http://" + r.Addr(ReplicaPort) + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatal("/readyz is 200 with a store it cannot reach")
			}
		}
		if err := r.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("with the CA in the image's bundle", func(t *testing.T) {
		bundle := append(append([]byte{}, hostBundle...), ca.PEM...)
		r, err := c.AddReplicaWith(ctx, []string{"serve"},
			testcontainers.WithEnv(env),
			testcontainers.WithFiles(testcontainers.ContainerFile{Reader: bytes.NewReader(bundle),
				ContainerFilePath: "/etc/ssl/certs/ca-certificates.crt", FileMode: 0o644}),
		)
		if err != nil {
			t.Fatal(err)
		}
		st, err := r.Container.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			t.Fatalf("serve exited: %d", st.ExitCode)
		}
		if code, out, err := r.Container.Exec(ctx, []string{"/seqkeeper", "create", "tls"}); err != nil || code != 0 {
			t.Fatalf("create: exit %d, %v, %s", code, err, readAll(out))
		}
		// An ID comes only from under a ceiling the store accepted, over
		// HTTPS.
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := http.Post("http://"+r.Addr(ReplicaPort)+"/v1/sequences/tls/ids?count=3", "", nil)
			if err == nil {
				var body struct {
					Ranges [][2]int64 `json:"ranges"`
				}
				derr := json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && derr == nil && len(body.Ranges) > 0 {
					t.Logf("IDs over a store reached by HTTPS: %v", body.Ranges)
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no IDs within a minute (last error %v)%s", err, r.logTail(ctx, 30))
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The store's objects are there, read back over HTTPS from here.
		s3c := s3.New(s3.Options{
			BaseEndpoint: aws.String("https://" + minio.Addr(MinIOPort)),
			Region:       "us-east-1", UsePathStyle: true,
			Credentials:                credentials.NewStaticCredentialsProvider(MinIOUser, MinIOPassword, ""),
			RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
			ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
			HTTPClient: &http.Client{Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "minio"}}},
		})
		out, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(StoreBucket), Prefix: aws.String("tls/")})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Contents) == 0 {
			t.Fatal("no store objects under tls/ in the bucket")
		}
		t.Logf("%d store objects written over HTTPS", len(out.Contents))
	})
}

func readAll(r io.Reader) string {
	if r == nil {
		return ""
	}
	b, _ := io.ReadAll(r)
	return string(b)
}
