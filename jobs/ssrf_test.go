package jobs

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGuardControl(t *testing.T) {
	t.Parallel()

	tests := []struct {
		network, address string
		reason           string // "" = allowed
	}{
		// Public addresses pass. Nothing here connects: Control is called
		// directly.
		{"tcp4", "93.184.216.34:443", ""},
		{"tcp4", "8.8.8.8:80", ""},
		{"tcp4", "93.184.216.34:22", ""}, // ports are not restricted
		{"tcp6", "[2606:2800:220:1:248:1893:25c8:1946]:443", ""},
		{"tcp4", "100.63.255.255:443", ""}, // just below CGNAT
		{"tcp4", "100.128.0.0:443", ""},    // just above CGNAT
		{"tcp4", "172.32.0.1:443", ""},     // just above 172.16/12

		{"tcp4", "127.0.0.1:443", "loopback"},
		{"tcp4", "127.255.255.254:80", "loopback"},
		{"tcp6", "[::1]:80", "loopback"},
		{"tcp6", "[::ffff:127.0.0.1]:80", "loopback (IPv4-mapped)"},
		{"tcp6", "[::ffff:10.1.2.3]:80", "private (IPv4-mapped)"},
		{"tcp6", "[::ffff:8.8.8.8]:80", "IPv4-mapped"},
		{"tcp4", "0.0.0.0:80", "this network"},
		{"tcp4", "0.1.2.3:80", "this network"},
		{"tcp6", "[::]:80", "unspecified"},
		{"tcp4", "10.0.0.1:80", "private"},
		{"tcp4", "172.16.0.1:80", "private"},
		{"tcp4", "172.31.255.255:80", "private"},
		{"tcp4", "192.168.1.1:80", "private"},
		{"tcp4", "169.254.169.254:80", "cloud metadata"},
		{"tcp4", "169.254.1.1:80", "link-local"},
		{"tcp4", "100.100.100.200:80", "cloud metadata"},
		{"tcp4", "100.64.0.1:80", "shared address space (CGNAT)"},
		{"tcp4", "192.0.0.8:80", "IETF protocol assignments"},
		{"tcp4", "192.0.2.1:80", "documentation"},
		{"tcp4", "198.18.0.1:80", "benchmarking"},
		{"tcp4", "198.19.255.255:80", "benchmarking"},
		{"tcp4", "198.51.100.7:80", "documentation"},
		{"tcp4", "203.0.113.9:80", "documentation"},
		{"tcp4", "224.0.0.1:80", "multicast"},
		{"tcp4", "239.255.255.250:80", "multicast"},
		{"tcp4", "240.0.0.1:80", "reserved"},
		{"tcp4", "255.255.255.255:80", "reserved"},
		{"tcp6", "[fd00::1]:80", "unique local (private)"},
		{"tcp6", "[fc00::1]:80", "unique local (private)"},
		{"tcp6", "[fd00:ec2::254]:80", "cloud metadata"},
		{"tcp6", "[fe80::1]:80", "link-local"},
		{"tcp6", "[fe80::1%eth0]:80", "link-local"},
		{"tcp6", "[ff02::1]:80", "multicast"},
		{"tcp6", "[64:ff9b::7f00:1]:80", "NAT64"},
		{"tcp6", "[64:ff9b:1::1]:80", "NAT64"},
		{"tcp6", "[2002:7f00:1::1]:80", "6to4"},
		{"tcp6", "[2001:db8::1]:80", "documentation"},
		{"tcp6", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:80", "Teredo"},
		{"tcp6", "[100::1]:80", "discard-only"},
		{"tcp6", "[::7f00:1]:80", "not global unicast"}, // deprecated IPv4-compatible
		{"tcp6", "[fec0::1]:80", "not global unicast"},  // deprecated site-local

		{"udp", "93.184.216.34:443", "network udp is not allowed"},
		{"udp4", "8.8.8.8:53", "network udp4 is not allowed"},
		{"tcp", "93.184.216.34:443", "network tcp is not allowed"},
		{"unix", "/run/docker.sock", "network unix is not allowed"},
		{"tcp4", "example.com:443", "not an IP address and port"},
		{"tcp4", "93.184.216.34", "not an IP address and port"},
	}
	guard := NewGuard(GuardConfig{})
	for _, tt := range tests {
		t.Run(tt.network+" "+tt.address, func(t *testing.T) {
			t.Parallel()

			err := guard.Control(tt.network, tt.address, nil)
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrBlockedTarget)
			var blocked *BlockedTargetError
			require.ErrorAs(t, err, &blocked)
			require.Equal(t, tt.reason, blocked.Reason)
		})
	}
}

// TestGuardErrorMessage: a refusal the server's setting lifts names the
// setting, so a user whose receiver runs on 127.0.0.1 reads the fix in the
// execution's last_error; one that nothing lifts does not suggest it.
func TestGuardErrorMessage(t *testing.T) {
	t.Parallel()

	guard := NewGuard(GuardConfig{})
	err := guard.Control("tcp4", "127.0.0.1:8080", nil)
	require.EqualError(t, err, "target address 127.0.0.1 is not allowed: loopback; "+
		"start ax with AX_ALLOW_PRIVATE_TARGETS=true to allow loopback and private targets (development and tests only)")
	for _, addr := range []string{"[::1]:80", "10.0.0.1:80", "192.168.1.1:80", "[fd00::1]:80", "169.254.169.254:80", "[::ffff:127.0.0.1]:80"} {
		require.ErrorContains(t, guard.Control("tcp6", addr, nil), "AX_ALLOW_PRIVATE_TARGETS=true", addr)
	}

	for _, notLifted := range []error{
		guard.Control("udp", "127.0.0.1:53", nil),
		guard.Control("tcp4", "example.com:443", nil),
		guard.CheckHost("127.1"),
	} {
		require.ErrorIs(t, notLifted, ErrBlockedTarget)
		require.NotContains(t, notLifted.Error(), "AX_ALLOW_PRIVATE_TARGETS", "the setting does not lift this refusal")
	}
}

func TestGuardAllowPrivate(t *testing.T) {
	t.Parallel()

	guard := NewGuard(GuardConfig{AllowPrivate: true})
	for _, addr := range []string{"127.0.0.1:80", "[::1]:80", "10.0.0.1:80", "169.254.169.254:80", "[fd00::1]:80", "93.184.216.34:443"} {
		require.NoError(t, guard.Control("tcp4", addr, nil), addr)
	}
	// The network check stays on.
	require.ErrorIs(t, guard.Control("udp", "127.0.0.1:53", nil), ErrBlockedTarget)
}

func TestGuardCheckHost(t *testing.T) {
	t.Parallel()

	tests := []struct {
		host    string
		blocked bool
	}{
		{"example.com", false},
		{"example.com.", false},
		{"hooks.1password.com", false},
		{"123.example.com", false},
		{"localhost", false}, // resolved, then refused by Control
		{"127.0.0.1", false}, // canonical literal: refused by Control
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"fe80::1%eth0", false},
		{"127.1", true},
		{"127.0.1", true},
		{"2130706433", true},
		{"0x7f000001", true},
		{"0X7F000001", true},
		{"0x7f.1", true},
		{"0177.0.0.1", true},
		{"127.0.0.1.", true},
		{"example.0x", true},
	}
	guard := NewGuard(GuardConfig{AllowPrivate: true}) // does not matter here
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()

			err := guard.CheckHost(tt.host)
			if tt.blocked {
				require.ErrorIs(t, err, ErrBlockedTarget)
				return
			}
			require.NoError(t, err)
		})
	}
}

// TestGuardDialer dials through the guarded dialer: the guard refuses
// before connect(2), so no packet leaves for the blocked address.
func TestGuardDialer(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	_, err = NewGuard(GuardConfig{}).Dialer(time.Second).DialContext(ctx, "tcp", ln.Addr().String())
	require.ErrorIs(t, err, ErrBlockedTarget)
	_, err = NewGuard(GuardConfig{}).Dialer(time.Second).DialContext(ctx, "udp", "127.0.0.1:53")
	require.ErrorIs(t, err, ErrBlockedTarget)

	conn, err := NewGuard(GuardConfig{AllowPrivate: true}).Dialer(time.Second).DialContext(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}
