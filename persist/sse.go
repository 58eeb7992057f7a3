package persist

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/aws/smithy-go"
)

// The forms of a KMS key that AWS S3 takes in SSEKMSKeyId: a key ID (a
// UUID, or mrk- and 32 hex digits for a multi-Region key), a key ARN, an
// alias name, or an alias ARN.
var (
	kmsKeyIDForm = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$`)
	kmsAliasForm = regexp.MustCompile(`^alias/[A-Za-z0-9/_-]{1,250}$`)
	kmsARNForm   = regexp.MustCompile(`^arn:aws[a-z-]*:kms:([a-z0-9-]+):[0-9]{12}:(key/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})|alias/[A-Za-z0-9/_-]{1,250})$`)
)

// kmsKeyForms is shown in every error about the key, so the fix is in the
// message.
const kmsKeyForms = "give the key's ARN (arn:aws:kms:REGION:ACCOUNT:key/KEY-ID), its key ID, an alias (alias/NAME) or an alias ARN; for MinIO, the name of a key its KMS holds"

// checkKMSKeyID checks the form of S3Config.SSEKMSKeyID ("" is no SSE-KMS).
// On AWS itself (no endpoint) the key must be in one of the forms S3
// takes; S3-compatible servers name their keys as they please, so there
// the key must only be printable and without spaces.
func checkKMSKeyID(id, endpoint string) error {
	if id == "" {
		return nil
	}
	if len(id) > 2048 || strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return fmt.Errorf("sse_kms_key_id: not a KMS key (%d bytes, with spaces or unprintable characters): %s", len(id), kmsKeyForms)
	}
	if endpoint == "" && !kmsKeyIDForm.MatchString(id) && !kmsAliasForm.MatchString(id) && !kmsARNForm.MatchString(id) {
		return fmt.Errorf("sse_kms_key_id %q is not a KMS key that AWS S3 takes: %s", id, kmsKeyForms)
	}
	return nil
}

// kmsKeyRegion returns the region of a key or alias ARN, or "" for the
// other forms (which name a key in the bucket's region).
func kmsKeyRegion(id string) string {
	if m := kmsARNForm.FindStringSubmatch(id); m != nil {
		return m[1]
	}
	return ""
}

// kmsError says what to fix when the server refused a request for its
// encryption, or returns nil when the error is about something else.
func (b *S3Backend) kmsError(ae smithy.APIError, err error) error {
	key := "the store's SSE-KMS key"
	if b.kmsKey != "" {
		key = fmt.Sprintf("the KMS key %q (sse_kms_key_id in the store URL)", b.kmsKey)
	}
	switch ae.ErrorCode() {
	case "KMS.NotFoundException", "kms:KeyNotFound": // AWS, MinIO
		return fmt.Errorf("%s does not exist, or not in the bucket's region and account: check sse_kms_key_id (a key ARN names the key unambiguously): %w", key, err)
	case "KMS.DisabledException", "KMS.KMSInvalidStateException":
		return fmt.Errorf("%s is disabled or pending deletion: enable it (or cancel its deletion) in KMS; every object encrypted with it is unreadable meanwhile: %w", key, err)
	case "AccessDenied":
		// AWS refuses a request whose KMS call IAM denied with S3's own
		// AccessDenied, naming the KMS action in the message.
		if strings.Contains(ae.ErrorMessage(), "kms:") {
			return fmt.Errorf("the credentials may not use %s: allow kms:GenerateDataKey and kms:Decrypt on it, in the key policy or an IAM policy (docs/operations.md, \"The least S3 permissions\"): %w", key, err)
		}
	case "NotImplemented":
		if b.kmsKey != "" && strings.Contains(ae.ErrorMessage(), "KMS") {
			return fmt.Errorf("the S3 server has no KMS, so it cannot encrypt with %s: configure its KMS (MinIO: MINIO_KMS_KES_* or MINIO_KMS_SECRET_KEY) or remove sse_kms_key_id from the store URL: %w", key, err)
		}
	}
	return nil
}
