package jobs

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrBlockedTarget means a webhook target resolved to an address ax refuses
// to connect to (loopback, private, link-local, metadata, …) or was spelled
// in a way that hides such an address. Deliveries to it fail permanently.
var ErrBlockedTarget = errors.New("blocked target")

// BlockedTargetError says which address was refused and why. It unwraps to
// ErrBlockedTarget.
type BlockedTargetError struct {
	// Target is the resolved IP address, or the host or network as given
	// when there is no address to show.
	Target string
	// Reason names the range or rule that matched, e.g. "loopback".
	Reason string
	// InRange is set when an address range refused the target (loopback,
	// private, metadata, …): a refusal GuardConfig.AllowPrivate lifts, so
	// the message says how. The network and host-spelling checks, which
	// nothing lifts, leave it unset.
	InRange bool
}

// allowPrivateHint ends the message of a refusal that the server's
// AX_ALLOW_PRIVATE_TARGETS lifts: the message is what a user reads in an
// execution's last_error, and a receiver on 127.0.0.1 is the first thing
// a new user tries.
const allowPrivateHint = "start ax with AX_ALLOW_PRIVATE_TARGETS=true to allow loopback and private targets (development and tests only)"

func (e *BlockedTargetError) Error() string {
	msg := "target address " + e.Target + " is not allowed: " + e.Reason
	if e.InRange {
		msg += "; " + allowPrivateHint
	}
	return msg
}

// Unwrap lets errors.Is(err, ErrBlockedTarget) match.
func (e *BlockedTargetError) Unwrap() error { return ErrBlockedTarget }

// GuardConfig configures a Guard.
type GuardConfig struct {
	// AllowPrivate disables the address-range check so that webhooks can
	// reach loopback and private networks (development, tests). The
	// network and host-spelling checks still apply. Default false.
	AllowPrivate bool
}

// Guard decides, at connect time, whether a resolved address may be dialed.
// Checking after resolution (in net.Dialer.Control) is what defeats DNS
// rebinding and alternative spellings of an address; checking the URL's
// host name would not. Ports are not restricted: receivers on any port are
// legitimate. A Guard is immutable and safe for concurrent use.
type Guard struct {
	allowPrivate  bool
	blocked       []blockedRange
	globalUnicast netip.Prefix // 2000::/3, all IANA allocates for global unicast
}

type blockedRange struct {
	prefix netip.Prefix
	reason string
}

// NewGuard returns a Guard with ax's deny list.
func NewGuard(cfg GuardConfig) *Guard {
	return &Guard{
		allowPrivate:  cfg.AllowPrivate,
		blocked:       blockedRanges(),
		globalUnicast: netip.MustParsePrefix("2000::/3"),
	}
}

// blockedRanges lists the special-purpose ranges of the IANA IPv4 and IPv6
// registries that a webhook must never reach. Order matters only for the
// reason reported: specific entries come before the ranges containing them.
// IPv6 outside 2000::/3 is refused separately as not global unicast.
func blockedRanges() []blockedRange {
	table := []struct{ prefix, reason string }{
		// Cloud metadata services, named for clearer errors.
		{"169.254.169.254/32", "cloud metadata"},
		{"100.100.100.200/32", "cloud metadata"},
		{"fd00:ec2::254/128", "cloud metadata"},

		{"0.0.0.0/8", "this network"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "shared address space (CGNAT)"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"}, // includes the broadcast address

		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::ffff:0:0/96", "IPv4-mapped"},
		{"64:ff9b::/96", "NAT64"},
		{"64:ff9b:1::/48", "NAT64"},
		{"100::/64", "discard-only"},
		{"2001::/32", "Teredo"},
		{"2001:2::/48", "benchmarking"},
		{"2001:db8::/32", "documentation"},
		{"2002::/16", "6to4"},
		{"3fff::/20", "documentation"},
		{"fc00::/7", "unique local (private)"},
		{"fe80::/10", "link-local"},
		{"ff00::/8", "multicast"},
	}
	ranges := make([]blockedRange, len(table))
	for i, r := range table {
		ranges[i] = blockedRange{prefix: netip.MustParsePrefix(r.prefix), reason: r.reason}
	}
	return ranges
}

// Control is a net.Dialer.Control function. It runs after name resolution
// and before connect(2), with the address actually about to be dialed, and
// refuses any network but tcp4/tcp6 and any blocked address.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return &BlockedTargetError{Target: network + " " + address, Reason: "network " + network + " is not allowed"}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &BlockedTargetError{Target: address, Reason: "not an IP address and port"}
	}
	if g.allowPrivate {
		return nil
	}
	if reason := g.blockedReason(ap.Addr()); reason != "" {
		return &BlockedTargetError{Target: ap.Addr().String(), Reason: reason, InRange: true}
	}
	return nil
}

// blockedReason names the rule that refuses addr, or returns "" when addr
// may be dialed.
func (g *Guard) blockedReason(addr netip.Addr) string {
	// Prefix.Contains never matches an address with a zone.
	addr = addr.WithZone("")
	if addr.Is4In6() {
		// Name the IPv4 range when there is one; refuse the mapped form
		// in any case.
		if reason := g.match(addr.Unmap()); reason != "" {
			return reason + " (IPv4-mapped)"
		}
	}
	if reason := g.match(addr); reason != "" {
		return reason
	}
	if addr.Is6() && !g.globalUnicast.Contains(addr) {
		return "not global unicast"
	}
	return ""
}

func (g *Guard) match(addr netip.Addr) string {
	for _, r := range g.blocked {
		if r.prefix.Contains(addr) {
			return r.reason
		}
	}
	return ""
}

// CheckHost refuses URL hosts that name an IPv4 address in a form Go's
// resolver does not parse as one but other software does ("127.1",
// "0x7f000001", "2130706433", "0177.0.0.1"): a host whose last label is a
// number, following the WHATWG URL "ends in a number" rule. Canonical IP
// literals and ordinary names pass; their addresses are checked by Control
// at dial time. This check does not depend on AllowPrivate.
func (g *Guard) CheckHost(host string) error {
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	name := strings.TrimSuffix(host, ".")
	last := name[strings.LastIndexByte(name, '.')+1:]
	if isNumericLabel(last) {
		return &BlockedTargetError{Target: host, Reason: "ambiguous numeric host"}
	}
	return nil
}

// isNumericLabel reports whether s is a decimal number or a 0x-prefixed
// hexadecimal one (an empty 0x counts, as in WHATWG's IPv4 parser).
func isNumericLabel(s string) bool {
	if s == "" {
		return false
	}
	digits := "0123456789"
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s, digits = s[2:], "0123456789abcdefABCDEF"
	}
	for i := range len(s) {
		if !strings.ContainsRune(digits, rune(s[i])) {
			return false
		}
	}
	return true
}

// Dialer returns a net.Dialer that runs g.Control on every address it is
// about to connect to, with the given connect timeout.
func (g *Guard) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Control:   g.Control,
	}
}
