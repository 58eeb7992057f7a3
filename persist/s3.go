package persist

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/backoff"
)

// S3Config says where an S3Backend keeps its objects and how it reaches
// them.
type S3Config struct {
	// Bucket is the S3 bucket. Required.
	Bucket string
	// Prefix is prepended, with a '/', to every key, so several stores (or
	// clusters) can share a bucket. Optional.
	Prefix string
	// Endpoint is the base URL of an S3-compatible server (MinIO, Ceph,
	// ...), addressed path-style. Empty means AWS itself.
	Endpoint string
	// Region is the signing region. Empty means the standard AWS chain
	// (AWS_REGION, shared config); with an Endpoint and no region found
	// there, us-east-1, which S3-compatible servers use by default.
	Region string
	// AccessKey and SecretKey are static credentials. Both empty means the
	// standard AWS credential chain (environment, shared config and
	// credentials files, SSO, instance or task role).
	AccessKey string
	SecretKey string
	// CreateBucket creates the bucket if it does not exist.
	CreateBucket bool
	// CreateWait is how long NewS3, with CreateBucket and an Endpoint,
	// keeps trying while the endpoint does not answer at all: its name
	// does not resolve yet or nothing listens on its port, as when MinIO
	// starts beside the replica or its pod is being replaced. A server
	// that answers, even with an error, is not waited for, and neither is
	// AWS itself (no Endpoint), where no answer means a wrong setting.
	// Zero tries once.
	CreateWait time.Duration
	// Logger, if set, is told once when NewS3 starts waiting.
	Logger *zerolog.Logger
	// SSEKMSKeyID, when set, makes every PUT ask the server to encrypt the
	// object with this KMS key (SSE-KMS: ServerSideEncryption aws:kms and
	// SSEKMSKeyId): on AWS a key ARN, key ID, alias (alias/NAME) or alias
	// ARN in the bucket's region; on MinIO the name of a key its KMS
	// holds. Reads need nothing more than kms:Decrypt on the key. Empty:
	// the objects are encrypted as the bucket's default says.
	SSEKMSKeyID string
}

// S3Backend is a Backend on an S3 bucket, using S3 conditional writes
// (If-None-Match: * to create, If-Match to replace). It needs a server that
// honours both on PutObject: AWS S3 (since 2024), MinIO, and others; a server
// that ignores them would break the store's monotonicity, which the shared
// conformance tests check.
type S3Backend struct {
	client *s3.Client
	bucket string
	prefix string // "" or ending in '/'
	desc   string
	// endpoint is S3Config.Endpoint: "" is AWS itself.
	endpoint string
	// kmsKey is S3Config.SSEKMSKeyID: "" is no SSE-KMS header.
	kmsKey string
}

// NewS3 returns a backend for cfg. It does no network I/O unless
// cfg.CreateBucket is set; credentials from the AWS chain are resolved on
// first use.
func NewS3(ctx context.Context, cfg S3Config) (*S3Backend, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("%w: S3 store: no bucket (%s)", ErrBadURL, storeURLForms)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := validateKey(prefix); err != nil {
			return nil, fmt.Errorf("%w: S3 store prefix: %v", ErrBadURL, err)
		}
		prefix += "/"
	}
	if err := checkKMSKeyID(cfg.SSEKMSKeyID, cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("%w: S3 store: %v", ErrBadURL, err)
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New("S3 store: give both an access key and a secret key, or neither (to use the AWS credential chain)")
	}
	var loadOpts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("S3 store: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, fmt.Errorf("%w: S3 store: no region: add ?region= to the URL or set AWS_REGION", ErrBadURL)
		}
		awsCfg.Region = "us-east-1"
	}
	if r := kmsKeyRegion(cfg.SSEKMSKeyID); r != "" && cfg.Endpoint == "" && r != awsCfg.Region {
		return nil, fmt.Errorf("%w: S3 store: sse_kms_key_id %q is a key in %s, the store is in %s: S3 encrypts only with a key in the bucket's region; give a key (or a multi-Region key's replica) in %s", ErrBadURL, cfg.SSEKMSKeyID, r, awsCfg.Region, awsCfg.Region)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
		// S3-compatible servers differ in their support of the newer
		// default checksums; the store does not need them (gzip has a
		// CRC and the decoder checks everything).
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		// An untrusted certificate does not heal by itself: the first
		// attempt's error, with mapError's advice, not three attempts'.
		// The retryer is the one the configuration asks for (its retry
		// mode), with that one refusal in front.
		base := o.Retryer
		if base == nil {
			base = awsretry.NewStandard()
			if o.RetryMode == aws.RetryModeAdaptive {
				base = awsretry.NewAdaptiveMode()
			}
		}
		o.Retryer = trustedOnly{base}
	})
	b := &S3Backend{client: client, bucket: cfg.Bucket, prefix: prefix, endpoint: cfg.Endpoint, kmsKey: cfg.SSEKMSKeyID}
	b.desc = strings.TrimSuffix("s3://"+cfg.Bucket+"/"+prefix, "/")
	where := cfg.Endpoint
	if where == "" {
		where = awsCfg.Region
	}
	if cfg.SSEKMSKeyID != "" {
		where += ", SSE-KMS key " + cfg.SSEKMSKeyID
	}
	b.desc += " (" + where + ")"
	if cfg.CreateBucket {
		if err := b.createBucketWhenReachable(ctx, awsCfg.Region, cfg.CreateWait, cfg.Logger); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// reachPolicy spaces createBucketWhenReachable's attempts.
var reachPolicy = backoff.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second}

// createBucketWhenReachable is createBucket, tried again for up to wait
// while the endpoint does not answer (see S3Config.CreateWait).
func (b *S3Backend) createBucketWhenReachable(ctx context.Context, region string, wait time.Duration, log *zerolog.Logger) error {
	deadline := time.Now().Add(wait)
	for attempt := 0; ; attempt++ {
		err := b.createBucket(ctx, region)
		if err == nil || b.endpoint == "" || !unreachable(err) {
			return err
		}
		delay := reachPolicy.Delay(attempt)
		if time.Now().Add(delay).After(deadline) {
			if attempt == 0 {
				return err
			}
			return fmt.Errorf("%w (the endpoint did not answer for %v)", err, wait.Round(time.Second))
		}
		if attempt == 0 && log != nil {
			log.Warn().Err(err).Dur("wait_ms", wait).Msg("store: the S3 endpoint does not answer yet; waiting for it")
		}
		if err := backoff.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("%s: waiting for the S3 endpoint to answer: %w", b.desc, err)
		}
	}
}

// trustedOnly is a retryer that never retries a TLS handshake that
// refused the server's certificate.
type trustedOnly struct{ aws.Retryer }

func (r trustedOnly) IsErrorRetryable(err error) bool {
	return !untrusted(err) && r.Retryer.IsErrorRetryable(err)
}

// GetAttemptToken is the wrapped retryer's (aws.RetryerV2).
func (r trustedOnly) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if v2, ok := r.Retryer.(aws.RetryerV2); ok {
		return v2.GetAttemptToken(ctx)
	}
	return r.GetInitialToken(), nil
}

// untrusted tells an error of a TLS handshake that refused the server's
// certificate.
func untrusted(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &unknownCA) || errors.As(err, &badHost) || errors.As(err, &invalid)
}

// unreachable tells an error of a request that reached no server (its
// name has no address, or the dial found no listener or no route) from
// one that met a server: an answer, or a TLS handshake that failed.
func unreachable(err error) bool {
	var send *smithyhttp.RequestSendError
	if !errors.As(err, &send) {
		return false
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) && opErr.Op == "dial"
}

// createBucket creates the bucket unless HeadBucket finds it: an
// existing bucket costs no CreateBucket call, so credentials without
// s3:CreateBucket work with a bucket made beforehand.
func (b *S3Backend) createBucket(ctx context.Context, region string) error {
	// Any other answer (no s3:ListBucket, the server unreachable) falls
	// through to CreateBucket, whose error says what is wrong.
	if _, err := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.bucket)}); err == nil {
		return nil
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(b.bucket)}
	if region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(region),
		}
	}
	_, err := b.client.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("%s: create bucket: %w", b.desc, b.mapError(err))
	}
	return nil
}

// String names the bucket, prefix and endpoint (or region).
func (b *S3Backend) String() string { return b.desc }

// Get implements Backend. Only a missing key is ErrNotFound: a missing
// bucket, or one the credentials cannot read, is an error, so that it never
// reads as an empty store.
func (b *S3Backend) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := validateKey(key); err != nil {
		return nil, "", fmt.Errorf("get: %w", err)
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(b.prefix + key)})
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, b.mapError(err))
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, maxObject+1))
	if err != nil {
		return nil, "", fmt.Errorf("get %s: read body: %w", key, err)
	}
	if len(data) > maxObject {
		return nil, "", fmt.Errorf("get %s: %w", key, corruptf("larger than %d bytes", maxObject))
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return nil, "", fmt.Errorf("get %s: the server sent no ETag, which conditional writes need", key)
	}
	return data, etag, nil
}

// Put implements Backend with If-None-Match: * (create) or If-Match, and
// the SSE-KMS headers when the store has a KMS key. S3 answers a failed
// precondition with 412 PreconditionFailed, and a race with another
// conditional write to the key with 409 ConditionalRequestConflict; both
// are ErrConflict. The SDK retries transient failures itself, so a
// write whose reply was lost can come back as ErrConflict although it
// landed: callers re-read, as on any conflict.
func (b *S3Backend) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	if err := validateKey(key); err != nil {
		return "", fmt.Errorf("put: %w", err)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(b.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/octet-stream"),
	}
	if ifMatch == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(ifMatch)
	}
	if b.kmsKey != "" {
		in.ServerSideEncryption = types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(b.kmsKey)
	}
	out, err := b.client.PutObject(ctx, in)
	if err != nil {
		err = b.mapError(err)
		if ifMatch != "" && errors.Is(err, ErrNotFound) {
			// If-Match on a missing object: the precondition failed.
			err = fmt.Errorf("%w: object is gone: %w", ErrConflict, err)
		}
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return "", fmt.Errorf("put %s: the server sent no ETag, which conditional writes need", key)
	}
	return etag, nil
}

// Delete implements Backend. S3 answers 204 whether or not the key
// existed.
func (b *S3Backend) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(b.prefix + key)})
	if err != nil && !errors.Is(b.mapError(err), ErrNotFound) {
		return fmt.Errorf("delete %s: %w", key, b.mapError(err))
	}
	return nil
}

// List implements Backend with ListObjectsV2, a page of up to 1,000 keys
// at a time.
func (b *S3Backend) List(ctx context.Context, prefix string) ([]string, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	var keys []string
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: aws.String(b.prefix + prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, b.mapError(err))
		}
		for _, o := range page.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), b.prefix))
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// mapError adds this package's sentinels to the S3 errors that mean them.
// Only a missing key is ErrNotFound: a missing bucket must never read as an
// empty store.
func (b *S3Backend) mapError(err error) error {
	// The SDK has no error type for "no credentials": its signer and its
	// identity resolver word it these two ways.
	if msg := err.Error(); strings.Contains(msg, "failed to retrieve credentials") || strings.Contains(msg, "failed to refresh cached credentials") {
		return fmt.Errorf("no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a shared credentials file, or run with an instance or pod role (IRSA): %w", err)
	}
	if untrusted(err) {
		return fmt.Errorf("the store's TLS certificate is not trusted: add its CA to the system bundle (/etc/ssl/certs/ca-certificates.crt in the image) or point SSL_CERT_FILE at a bundle that holds it: %w", err)
	}
	var netErr *net.OpError
	var dnsErr *net.DNSError
	if b.endpoint == "" && (errors.As(err, &netErr) || errors.As(err, &dnsErr)) {
		return fmt.Errorf("AWS S3 did not answer: the store URL has no ?endpoint=, so the store is AWS itself; for MinIO or another S3-compatible server add ?endpoint=http://HOST:9000 to the store URL: %w", err)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if kmsErr := b.kmsError(ae, err); kmsErr != nil {
			return kmsErr
		}
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			return fmt.Errorf("the bucket %q does not exist: create it, or let serve create it (create_bucket, on by default): %w", b.bucket, err)
		case "PreconditionFailed":
			return fmt.Errorf("%w: %w", ErrConflict, err)
		case "ConditionalRequestConflict":
			// 409: a concurrent conditional write to the same key was
			// in flight; AWS asks for a retry, which is what a conflict
			// gets.
			return fmt.Errorf("%w: %w", ErrConflict, err)
		case "NoSuchKey":
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "AccessDenied":
			return fmt.Errorf("%s: %w", b.credentialsAdvice(ae.ErrorCode()), err)
		}
	}
	return err
}

// credentialsAdvice says which setting to check when the server refused
// the credentials (code is its error code). Without an endpoint the store
// is AWS itself, where MinIO's keys are unknown: the usual cause is a
// forgotten ?endpoint=.
func (b *S3Backend) credentialsAdvice(code string) string {
	where := "the S3 server at " + b.endpoint
	if b.endpoint == "" {
		where = "AWS S3 (the store URL has no ?endpoint=, so it is AWS itself; for MinIO or another S3-compatible server add ?endpoint=http://HOST:9000 to the store URL)"
	}
	switch code {
	case "InvalidAccessKeyId":
		return fmt.Sprintf("%s does not know the access key: check AWS_ACCESS_KEY_ID (or the profile or role the AWS credential chain found)", where)
	case "SignatureDoesNotMatch":
		return fmt.Sprintf("%s refused the request's signature: the secret key does not match the access key; check AWS_SECRET_ACCESS_KEY", where)
	case "InvalidToken", "ExpiredToken":
		return fmt.Sprintf("%s refused the session token: check or renew AWS_SESSION_TOKEN (or the role's credentials)", where)
	}
	// Objects may be encrypted with a KMS key by the bucket's default even
	// without sse_kms_key_id, so the KMS permissions are always named.
	return fmt.Sprintf("%s denied access to bucket %q: the credentials lack permission (s3:GetObject, s3:PutObject, s3:DeleteObject, s3:ListBucket on it; with SSE-KMS also kms:GenerateDataKey and kms:Decrypt on the key), or the bucket belongs to another account", where, b.bucket)
}

// ParseS3URL parses the --store form
// s3://bucket/prefix?endpoint=URL&region=R&sse_kms_key_id=KEY. The prefix
// and the parameters are optional; sse_kms_key_id is S3Config.SSEKMSKeyID.
// Credentials are not accepted in the URL (use the AWS chain or
// OpenOptions). Errors wrap ErrBadURL and show the expected form.
func ParseS3URL(rawURL string) (S3Config, error) {
	bad := func(format string, args ...any) (S3Config, error) {
		return S3Config{}, fmt.Errorf("%w: %s (%s)", ErrBadURL, fmt.Sprintf(format, args...), storeURLForms)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, which may hold a secret
		}
		return bad("unparseable S3 URL: %v", err)
	}
	if u.Scheme != "s3" {
		return bad("not an s3:// URL")
	}
	if u.User != nil {
		return bad("credentials do not belong in the store URL (it shows up in process lists and logs): use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a shared credentials file or an instance role")
	}
	if u.Opaque != "" {
		return bad("s3: URL without // (write s3://bucket/prefix)")
	}
	if u.Host == "" {
		return bad("no bucket in %q", u.Redacted())
	}
	if u.Fragment != "" {
		return bad("unexpected #fragment in %q", u.Redacted())
	}
	cfg := S3Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if cfg.Prefix != "" {
		if err := validateKey(cfg.Prefix); err != nil {
			return bad("bad prefix: %v", err)
		}
	}
	for k, v := range u.Query() {
		if len(v) != 1 {
			return bad("parameter %q given %d times", k, len(v))
		}
		switch k {
		case "endpoint":
			ep, err := url.Parse(v[0])
			if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" || ep.User != nil {
				shown := v[0]
				if ep != nil && ep.User != nil {
					ep.User = url.User("REDACTED")
					shown = ep.String()
				} else if err != nil {
					shown = fmt.Sprintf("an unparseable URL of %d bytes", len(v[0]))
				}
				return bad("endpoint must be an http:// or https:// URL without credentials, got %q", shown)
			}
			cfg.Endpoint = v[0]
		case "region":
			if v[0] == "" {
				return bad("empty region")
			}
			cfg.Region = v[0]
		case "sse_kms_key_id":
			if v[0] == "" {
				return bad("empty sse_kms_key_id: %s, or leave the parameter out", kmsKeyForms)
			}
			cfg.SSEKMSKeyID = v[0]
		default:
			return bad("unknown parameter %q (known: endpoint, region, sse_kms_key_id)", k)
		}
	}
	if err := checkKMSKeyID(cfg.SSEKMSKeyID, cfg.Endpoint); err != nil {
		return bad("%v", err)
	}
	return cfg, nil
}
