package config

import "fmt"

// redacted is what every printed form of a non-empty Secret shows.
const redacted = "[redacted]"

// Secret is a setting that must never reach a log line or an output: every
// way of printing or marshalling it (fmt's %v, %s, %q, %#v and %+v, JSON,
// text, YAML) yields "[redacted]", or "" when it is empty so that an unset
// secret can be told from a set one. Reveal returns the value.
type Secret string

// Reveal returns the secret's value. Call it only where the value is used
// (authenticating), never to print it.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return fmt.Sprintf("config.Secret(%q)", s.String()) }

// Format applies String to every verb, so that %q, %x and the like cannot
// print the value either.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'v':
		if f.Flag('#') {
			fmt.Fprint(f, s.GoString())
			return
		}
		fmt.Fprint(f, s.String())
	case 'q':
		fmt.Fprintf(f, "%q", s.String())
	default:
		fmt.Fprint(f, s.String())
	}
}

// MarshalText returns the redacted form; encoding/json and zerolog use it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML returns the redacted form.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }
