// Package redact keeps secrets out of what Quiver shows people: logs,
// errors, the health action, /readyz, the status page and `quiver check`.
// Storage URIs carry credentials in their userinfo
// (s3://KEY:SECRET@bucket/t) and in query values
// (?endpoint=http://KEY:SECRET@minio:9000, ?access_key=…), so every URI
// rendered for humans goes through URI, and text that may quote one
// (an error from a library) through Text.
package redact

import (
	"errors"
	"strings"
)

// Mask replaces each redacted part.
const Mask = "REDACTED"

// URI returns s with its userinfo and the value of every query parameter
// replaced by Mask, and its fragment dropped: "s3://k:s@b/t?region=x"
// becomes "s3://REDACTED@b/t?region=REDACTED". Scheme, host, path and the
// query's keys stay, so an operator still sees which table and which
// settings. Text without "://" (a local path, "topic x") is returned as
// is. It parses by hand rather than with net/url so that a malformed URI
// is redacted too.
func URI(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	head, rest := s[:i+3], s[i+3:]
	rest, _, _ = strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	// Everything before the last "@" goes: a secret pasted raw may hold
	// "/" (AWS secret keys often do), which would end the authority
	// early. A path holding "@" is masked too: over-redacting is safe.
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = Mask + rest[at:]
	}
	out := head + rest
	if hasQuery {
		out += "?" + redactQuery(query)
	}
	return out
}

// redactQuery masks the value of every key=value of a query, and every
// part without a key (which could be a bare token).
func redactQuery(q string) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		key, _, ok := strings.Cut(p, "=")
		switch {
		case ok:
			parts[i] = key + "=" + Mask
		case p != "":
			parts[i] = Mask
		}
	}
	return strings.Join(parts, "&")
}

// Text returns s with every URI in it redacted (URI). A URI runs from its
// scheme to the next space or quote; punctuation ending a sentence or a
// clause (":", ",", ";", ".", ")") stays outside it.
func Text(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := i
		for start > 0 && isSchemeByte(s[start-1]) {
			start--
		}
		end := i + 3
		for end < len(s) && !isDelimiter(s[end]) {
			end++
		}
		uri := strings.TrimRight(s[start:end], ":,;.)")
		b.WriteString(s[:start])
		b.WriteString(URI(uri))
		s = s[start+len(uri):]
	}
}

func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

func isDelimiter(c byte) bool {
	return c <= ' ' || strings.IndexByte("\"'`<>", c) >= 0
}

// Error returns an error saying what err says, redacted (Text), for
// records that leave the process, such as trace spans. It wraps nothing:
// it is for showing, not for errors.Is.
func Error(err error) error {
	return errors.New(Text(err.Error()))
}
