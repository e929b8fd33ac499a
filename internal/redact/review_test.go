package redact

import (
	"strings"
	"testing"
)

// TestSecretWithSlashIsRedacted: AWS secret access keys are base64 and
// often contain "/" (the documentation's example key does). Pasted raw
// into a URI's userinfo, the "/" ends what URI takes for the authority,
// no "@" is found there, and the secret is shown whole in logs, errors,
// health and status. Such a URI is malformed, which is exactly the case
// the hand parser says it covers.
func TestSecretWithSlashIsRedacted(t *testing.T) {
	const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	for _, s := range []string{
		"s3://AKIAIOSFODNN7EXAMPLE:" + secret + "@bucket/table",
		`open "s3://AKIAIOSFODNN7EXAMPLE:` + secret + `@bucket/table": parse error`,
	} {
		if got := Text(s); strings.Contains(got, "EXAMPLEKEY") {
			t.Errorf("Text(%q) = %q: the secret is shown", s, got)
		}
	}
}
