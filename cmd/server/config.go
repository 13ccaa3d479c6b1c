package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/retention"
)

// config is ax's configuration, read once from the environment (README, "Configuration").
type config struct {
	DatabaseURL         string          // AX_DATABASE_URL; empty: embedded Postgres
	DataDir             string          // AX_DATA_DIR
	HTTPAddr            string          // AX_HTTP_ADDR
	PublicURL           string          // AX_PUBLIC_URL; default http://localhost:<port of AX_HTTP_ADDR>
	JWTSecret           []byte          // AX_JWT_SECRET
	JWTPublicKeys       []api.PublicKey // AX_JWT_PUBLIC_KEYS (a PEM file)
	JWTIssuer           string          // AX_JWT_ISSUER
	JWTAudience         string          // AX_JWT_AUDIENCE
	AllowPrivateTargets bool            // AX_ALLOW_PRIVATE_TARGETS
	AutoMigrate         bool            // AX_AUTO_MIGRATE
	LogLevel            slog.Level      // AX_LOG_LEVEL
	ShutdownTimeout     time.Duration   // AX_SHUTDOWN_TIMEOUT
	MaxBodyBytes        int64           // AX_MAX_BODY_BYTES
	DeliverWorkers      int             // AX_DELIVER_WORKERS; 0: jobs default
	BulkWorkers         int             // AX_BULK_WORKERS: the bulk lane's; 0: DeliverWorkers
	DBMaxConns          int             // AX_DB_MAX_CONNS
	JobTimeout          time.Duration   // AX_JOB_TIMEOUT; 0: jobs default
	FetchPollInterval   time.Duration   // AX_FETCH_POLL_INTERVAL; 0: jobs default
	RescueAfter         time.Duration   // AX_RESCUE_STUCK_JOBS_AFTER; 0: jobs default
	SoftStopTimeout     time.Duration   // AX_SOFT_STOP_TIMEOUT; 0: jobs default
	ReplicaDeadAfter    time.Duration   // AX_REPLICA_DEAD_AFTER
	RiverUI             bool            // AX_RIVERUI: serve River's UI at /riverui/ to operator tokens
	AdminIsOperator     bool            // AX_ADMIN_IS_OPERATOR (deprecated): a tenant's admin keeps the operator's powers over its own tenant
	DebugAddr           string          // AX_DEBUG_ADDR: Go's pprof profiles on a separate listener; "" off
	ExecutionRetention  time.Duration   // AX_EXECUTION_RETENTION
	AuditRetention      time.Duration   // AX_AUDIT_RETENTION
	// TenantDefaults: AX_TENANT_MAX_TASKS, AX_TENANT_MAX_WORKFLOWS,
	// AX_TENANT_MAX_INFLIGHT, AX_TENANT_MAX_PER_SECOND, AX_TENANT_API_RPS
	// (unset or 0: no limit).
	TenantDefaults service.EffectiveLimits
}

// Defaults for the variables that have one.
const (
	dataDirDefault         = "./.ax"
	httpAddrDefault        = ":8080"
	shutdownTimeoutDefault = 30 * time.Second
	jwtSecretMin           = 32
	dbMaxConnsDefault      = 20
	gcPercentDefault       = 400 // unless GOGC is set
)

// Embedded reports whether ax runs its own Postgres.
func (c config) Embedded() bool { return c.DatabaseURL == "" }

// configErrors collects every invalid variable so a user fixes them in one go.
type configErrors []string

func (e configErrors) Error() string {
	return "invalid configuration:\n  " + strings.Join(e, "\n  ")
}

func (e *configErrors) add(name, value, want string) {
	if value != "" {
		*e = append(*e, fmt.Sprintf("%s=%q: %s", name, value, want))
		return
	}
	*e = append(*e, fmt.Sprintf("%s: %s", name, want))
}

// loadConfig reads and validates the environment.
func loadConfig(getenv func(string) string) (config, error) {
	var errs configErrors
	c := config{
		DatabaseURL: strings.TrimSpace(getenv("AX_DATABASE_URL")),
		DataDir:     orDefault(getenv("AX_DATA_DIR"), dataDirDefault),
		HTTPAddr:    orDefault(getenv("AX_HTTP_ADDR"), httpAddrDefault),
		JWTIssuer:   getenv("AX_JWT_ISSUER"),
		JWTAudience: getenv("AX_JWT_AUDIENCE"),
	}
	if c.DatabaseURL != "" {
		if err := checkDatabaseURL(c.DatabaseURL); err != nil {
			errs.add("AX_DATABASE_URL", "", err.Error())
		}
	}
	c.PublicURL = strings.TrimRight(strings.TrimSpace(getenv("AX_PUBLIC_URL")), "/")
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.add("AX_PUBLIC_URL", c.PublicURL, "want an http or https URL, e.g. https://ax.example.com")
		}
	} else if _, port, err := net.SplitHostPort(c.HTTPAddr); err == nil {
		c.PublicURL = "http://localhost:" + port
	}
	if _, port, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs.add("AX_HTTP_ADDR", c.HTTPAddr, `want host:port, e.g. ":8080" or "127.0.0.1:8080"`)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		errs.add("AX_HTTP_ADDR", c.HTTPAddr, "the port must be a number from 0 to 65535")
	}
	if s := getenv("AX_JWT_SECRET"); s != "" {
		if len(s) < jwtSecretMin {
			errs.add("AX_JWT_SECRET", "", fmt.Sprintf("must be at least %d characters (HS256 needs a 256-bit key); "+
				"generate one with `openssl rand -base64 48`", jwtSecretMin))
		}
		c.JWTSecret = []byte(s)
	}
	if path := getenv("AX_JWT_PUBLIC_KEYS"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			errs.add("AX_JWT_PUBLIC_KEYS", path, "cannot read the PEM file: "+unwrapPathError(err))
		} else if c.JWTPublicKeys, err = api.ParsePublicKeys(data); err != nil {
			errs.add("AX_JWT_PUBLIC_KEYS", path, "want a PEM file of RSA, ECDSA P-256 or Ed25519 public keys: "+err.Error())
		}
	}
	var err error
	if c.AllowPrivateTargets, err = parseBool(getenv("AX_ALLOW_PRIVATE_TARGETS"), false); err != nil {
		errs.add("AX_ALLOW_PRIVATE_TARGETS", getenv("AX_ALLOW_PRIVATE_TARGETS"), "want true or false")
	}
	if c.AutoMigrate, err = parseBool(getenv("AX_AUTO_MIGRATE"), true); err != nil {
		errs.add("AX_AUTO_MIGRATE", getenv("AX_AUTO_MIGRATE"), "want true or false")
	}
	if c.RiverUI, err = parseBool(getenv("AX_RIVERUI"), true); err != nil {
		errs.add("AX_RIVERUI", getenv("AX_RIVERUI"), "want true or false")
	}
	if c.AdminIsOperator, err = parseBool(getenv("AX_ADMIN_IS_OPERATOR"), false); err != nil {
		errs.add("AX_ADMIN_IS_OPERATOR", getenv("AX_ADMIN_IS_OPERATOR"), "want true or false")
	}
	c.DebugAddr = getenv("AX_DEBUG_ADDR")
	if err := c.LogLevel.UnmarshalText([]byte(orDefault(getenv("AX_LOG_LEVEL"), "info"))); err != nil {
		errs.add("AX_LOG_LEVEL", getenv("AX_LOG_LEVEL"), "want debug, info, warn or error")
	}
	c.ShutdownTimeout = shutdownTimeoutDefault
	if v := getenv("AX_SHUTDOWN_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			errs.add("AX_SHUTDOWN_TIMEOUT", v, `want a positive duration, e.g. "30s"`)
		} else {
			c.ShutdownTimeout = d
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"AX_JOB_TIMEOUT", &c.JobTimeout},
		{"AX_RESCUE_STUCK_JOBS_AFTER", &c.RescueAfter},
		{"AX_SOFT_STOP_TIMEOUT", &c.SoftStopTimeout},
	} {
		if v := getenv(d.name); v != "" {
			if p, err := time.ParseDuration(v); err != nil || p <= 0 {
				errs.add(d.name, v, `want a positive duration, e.g. "30s"`)
			} else {
				*d.dst = p
			}
		}
	}
	if jobTimeout := cmp.Or(c.JobTimeout, jobs.JobTimeoutDefault); c.RescueAfter > 0 && c.RescueAfter < jobTimeout {
		errs.add("AX_RESCUE_STUCK_JOBS_AFTER", getenv("AX_RESCUE_STUCK_JOBS_AFTER"),
			fmt.Sprintf("must be at least AX_JOB_TIMEOUT (%s)", jobTimeout))
	}
	c.ExecutionRetention, c.AuditRetention = retention.ExecutionsDefault, retention.AuditDefault
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"AX_EXECUTION_RETENTION", &c.ExecutionRetention},
		{"AX_AUDIT_RETENTION", &c.AuditRetention},
	} {
		if v := getenv(d.name); v != "" {
			if p, err := parseRetention(v); err != nil || p < retention.Min {
				errs.add(d.name, v, `want a duration of at least 1h: days ("30d") or a Go duration ("720h")`)
			} else {
				*d.dst = p
			}
		}
	}
	c.ReplicaDeadAfter = service.ReplicaDeadAfterDefault
	if v := getenv("AX_REPLICA_DEAD_AFTER"); v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < service.ReplicaDeadAfterMin || d > service.ReplicaDeadAfterMax {
			errs.add("AX_REPLICA_DEAD_AFTER", v, fmt.Sprintf(`want a duration from %s to %s, e.g. "15s"`,
				service.ReplicaDeadAfterMin, service.ReplicaDeadAfterMax))
		} else {
			c.ReplicaDeadAfter = d
		}
	}
	c.DBMaxConns = dbMaxConnsDefault
	if v := getenv("AX_DB_MAX_CONNS"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 4 || n > 1000 {
			errs.add("AX_DB_MAX_CONNS", v, "want a number from 4 to 1000")
		} else {
			c.DBMaxConns = n
		}
	}
	if v := getenv("AX_FETCH_POLL_INTERVAL"); v != "" {
		if p, err := time.ParseDuration(v); err != nil || p < 10*time.Millisecond || p > 10*time.Second {
			errs.add("AX_FETCH_POLL_INTERVAL", v, `want a duration from 10ms to 10s, e.g. "50ms"`)
		} else {
			c.FetchPollInterval = p
		}
	}
	if v := getenv("AX_BULK_WORKERS"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 10000 {
			errs.add("AX_BULK_WORKERS", v, "want a number from 1 to 10000")
		} else {
			c.BulkWorkers = n
		}
	}
	if v := getenv("AX_DELIVER_WORKERS"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 10000 {
			errs.add("AX_DELIVER_WORKERS", v, "want a number from 1 to 10000")
		} else {
			c.DeliverWorkers = n
		}
	}
	for _, d := range []struct {
		name string
		dst  *int
	}{
		{"AX_TENANT_MAX_TASKS", &c.TenantDefaults.MaxTasks},
		{"AX_TENANT_MAX_WORKFLOWS", &c.TenantDefaults.MaxWorkflows},
		{"AX_TENANT_MAX_INFLIGHT", &c.TenantDefaults.MaxInflightDeliveries},
	} {
		if v := getenv(d.name); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 0 || n > 1<<31-1 {
				errs.add(d.name, v, "want a whole number (0: no limit)")
			} else {
				*d.dst = n
			}
		}
	}
	for _, d := range []struct {
		name string
		dst  *float64
	}{
		{"AX_TENANT_MAX_PER_SECOND", &c.TenantDefaults.MaxDeliveriesPerSecond},
		{"AX_TENANT_API_RPS", &c.TenantDefaults.APIRequestsPerSecond},
	} {
		if v := getenv(d.name); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err != nil || !(f >= 0) || f > 1e6 {
				errs.add(d.name, v, "want a number of requests per second (0: no limit)")
			} else {
				*d.dst = f
			}
		}
	}
	c.MaxBodyBytes = api.BodyLimitDefault
	if v := getenv("AX_MAX_BODY_BYTES"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 1024 || n > 64<<20 {
			errs.add("AX_MAX_BODY_BYTES", v, "want a number of bytes from 1024 to 67108864")
		} else {
			c.MaxBodyBytes = n
		}
	}
	if len(errs) > 0 {
		return config{}, errs
	}
	return c, nil
}

// checkAuth reports a configuration that could verify no token: serve
// needs a key, migrate does not.
func (c config) checkAuth() error {
	if c.DatabaseURL != "" && len(c.JWTSecret) == 0 && len(c.JWTPublicKeys) == 0 {
		var errs configErrors
		errs.add("AX_JWT_SECRET", "", "required with AX_DATABASE_URL unless AX_JWT_PUBLIC_KEYS is set "+
			"(only the embedded mode generates a development secret)")
		return errs
	}
	return nil
}

func checkDatabaseURL(raw string) error {
	if strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://") {
		if _, err := url.Parse(raw); err != nil {
			return errors.New("not a valid URL (check for unescaped characters in the password)")
		}
		return nil
	}
	if strings.Contains(raw, "=") { // keyword/value form: host=... dbname=...
		return nil
	}
	return errors.New(`want a PostgreSQL URL such as "postgres://user:pass@host:5432/ax" or keyword/value settings`)
}

// parseRetention reads a retention: a whole number of days ("30d") or a
// Go duration ("720h", "90m").
func parseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100*365 {
			return 0, fmt.Errorf("%q: not a number of days", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

func parseBool(v string, def bool) (bool, error) {
	if v == "" {
		return def, nil
	}
	return strconv.ParseBool(strings.ToLower(strings.TrimSpace(v)))
}

func orDefault(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return v
}

func unwrapPathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
