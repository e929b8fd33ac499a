package quiverflag

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestRegisterDefaults(t *testing.T) {
	t.Setenv("QUIVER_TOKEN", "from-env")
	tests := []struct {
		name string
		args []string
		want Conn
	}{
		{"defaults", nil, Conn{Addr: DefaultAddr, Token: "from-env"}},
		{"flags win", []string{"--addr", "h:1", "--token", "t", "--tls-ca", "ca.pem"}, Conn{Addr: "h:1", Token: "t", TLSCA: "ca.pem"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			c := Register(fs, DefaultAddr)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if *c != tt.want {
				t.Errorf("conn = %+v, want %+v", *c, tt.want)
			}
		})
	}
}

func TestDialUsesTLSFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := Register(fs, DefaultAddr)
	if err := fs.Parse([]string{"--tls-cert", "cert.pem"}); err != nil {
		t.Fatal(err)
	}
	// A cert without a key can only fail if the TLS flags reached Dial.
	if _, err := c.Dial(); err == nil || !strings.Contains(err.Error(), "both the cert and the key") {
		t.Errorf("Dial = %v, want the TLS options' error", err)
	}
}
