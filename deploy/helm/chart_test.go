// Package helm_test checks the Helm chart in ax/: it lints and renders the
// chart with helm v3 and asserts on the rendered manifests. When helm is not
// on PATH or in GOBIN, the test installs it with `go install` (a few minutes
// the first time, cached after).
package helm_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const (
	chartDir    = "ax"
	helmModule  = "helm.sh/helm/v3/cmd/helm"
	helmVersion = "v3.22.0"
	release     = "ax"
	namespace   = "ax-test"
)

func TestLint(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"default":    nil,
		"production": {"-f", filepath.Join(chartDir, "values-production.yaml")},
		"runner":     {"-f", filepath.Join(chartDir, "values-runner.yaml")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := runHelm(t, append([]string{"lint", "--strict", chartDir}, args...)...)
			require.NoError(t, err, out)
			require.Contains(t, out, "0 chart(s) failed")
		})
	}
}

func TestDefaultValues(t *testing.T) {
	t.Parallel()
	m := render(t)

	d := decode[deployment](t, m.get(t, "Deployment", "ax"))
	require.NotNil(t, d.Spec.Replicas)
	require.Equal(t, 2, *d.Spec.Replicas)
	require.Equal(t, "RollingUpdate", d.Spec.Strategy.Type)
	require.Equal(t, "0", fmt.Sprint(d.Spec.Strategy.RollingUpdate.MaxUnavailable), "a rollout never drops below the desired count")
	require.Equal(t, "ghcr.io/axhq/ax:"+appVersion(t), server(t, d).Image, "the image tag defaults to appVersion")
	checkServerPod(t, d)
	require.NotEmpty(t, d.Spec.Template.Spec.Affinity.PodAntiAffinity.Preferred, "replicas are spread over nodes")

	env := envOf(server(t, d))
	require.Equal(t, "false", env["AX_AUTO_MIGRATE"].Value, "the hook Job migrates, not the pods")
	requireSecretRef(t, env, "AX_DATABASE_URL", "ax")
	requireSecretRef(t, env, "AX_JWT_SECRET", "ax")
	require.NotContains(t, env, "AX_JWT_PUBLIC_KEYS")
	requireEnvFromConfigMap(t, server(t, d), "ax")
	require.Equal(t, "info", decode[configMap](t, m.get(t, "ConfigMap", "ax")).Data["AX_LOG_LEVEL"])

	// The chart's Secret: no database yet (NOTES.txt says so), a generated
	// HS256 secret that the migration hook's copy shares.
	sec := secretData(t, m.get(t, "Secret", "ax"))
	require.NotContains(t, sec, "AX_DATABASE_URL")
	require.GreaterOrEqual(t, len(sec["AX_JWT_SECRET"]), 32)
	require.Equal(t, sec, secretData(t, m.get(t, "Secret", "ax-migrate")))

	checkMigrationJob(t, m, "ax-migrate")
	j := m.get(t, "Job", "ax-migrate")
	require.Empty(t, decode[job](t, j).Spec.Template.Spec.ServiceAccountName,
		"a pre-install hook cannot use the ServiceAccount the release creates")

	svc := decode[service](t, m.get(t, "Service", "ax"))
	require.Equal(t, "ClusterIP", svc.Spec.Type)
	require.Len(t, svc.Spec.Ports, 1)
	require.Equal(t, port{Name: "http", Port: 80, TargetPort: "http"}, svc.Spec.Ports[0])
	require.Equal(t, d.Spec.Selector.MatchLabels, svc.Spec.Selector)
	requireSelects(t, svc.Spec.Selector, d.Spec.Template.Metadata.Labels)
	require.False(t, selects(svc.Spec.Selector, decode[job](t, j).Spec.Template.Metadata.Labels),
		"the Service must not route to the migration pod")

	pdb := decode[podDisruptionBudget](t, m.get(t, "PodDisruptionBudget", "ax"))
	require.Equal(t, 1, pdb.Spec.MinAvailable)
	require.Equal(t, d.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)

	require.False(t, m.has("HorizontalPodAutoscaler", "ax"))
	require.False(t, m.has("ServiceMonitor", "ax"))
	require.False(t, m.has("ConfigMap", "ax-jwt"))
}

func TestChartSecret(t *testing.T) {
	t.Parallel()
	const url = "postgres://ax:pw@pg.db:5432/ax?sslmode=require"
	jwt := strings.Repeat("s3cr3t-", 6)
	m := render(t, "--set", "secrets.databaseURL="+url, "--set", "secrets.jwtSecret="+jwt)

	want := map[string]string{"AX_DATABASE_URL": url, "AX_JWT_SECRET": jwt}
	require.Equal(t, want, secretData(t, m.get(t, "Secret", "ax")))
	require.Equal(t, want, secretData(t, m.get(t, "Secret", "ax-migrate")))
	checkMigrationJob(t, m, "ax-migrate")

	d := decode[deployment](t, m.get(t, "Deployment", "ax"))
	env := envOf(server(t, d))
	requireSecretRef(t, env, "AX_DATABASE_URL", "ax")
	requireSecretRef(t, env, "AX_JWT_SECRET", "ax")
	require.Contains(t, d.Spec.Template.Metadata.Annotations, "checksum/secret", "pods roll when the Secret changes")
}

func TestProductionValues(t *testing.T) {
	t.Parallel()
	m := render(t, "-f", filepath.Join(chartDir, "values-production.yaml"))

	d := decode[deployment](t, m.get(t, "Deployment", "ax"))
	require.Nil(t, d.Spec.Replicas, "with an HPA the Deployment leaves replicas to it")
	require.Equal(t, "ghcr.io/axhq/ax:0.1.0", server(t, d).Image)
	checkServerPod(t, d)
	require.Equal(t, 90, d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	require.NotEmpty(t, d.Spec.Template.Spec.TopologySpreadConstraints)
	res := server(t, d).Resources
	require.Equal(t, "500m", res.Requests["cpu"])
	require.Equal(t, "1Gi", res.Limits["memory"])

	// existingSecret: the chart renders no Secret, both the pods and the
	// hook read the one made outside Helm.
	require.False(t, m.has("Secret", "ax"))
	require.False(t, m.has("Secret", "ax-migrate"))
	env := envOf(server(t, d))
	requireSecretRef(t, env, "AX_DATABASE_URL", "ax-secrets")
	requireSecretRef(t, env, "AX_JWT_SECRET", "ax-secrets")
	require.NotContains(t, d.Spec.Template.Metadata.Annotations, "checksum/secret")
	checkMigrationJob(t, m, "ax-secrets")
	cm := decode[configMap](t, m.get(t, "ConfigMap", "ax"))
	require.Equal(t, "https://auth.example.com/", cm.Data["AX_JWT_ISSUER"])

	hpa := decode[horizontalPodAutoscaler](t, m.get(t, "HorizontalPodAutoscaler", "ax"))
	require.Equal(t, "autoscaling/v2", m.get(t, "HorizontalPodAutoscaler", "ax").APIVersion)
	require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
	require.Equal(t, "ax", hpa.Spec.ScaleTargetRef.Name)
	require.Equal(t, 3, hpa.Spec.MinReplicas)
	require.Equal(t, 12, hpa.Spec.MaxReplicas)
	require.Len(t, hpa.Spec.Metrics, 1)
	require.Equal(t, "cpu", hpa.Spec.Metrics[0].Resource.Name)
	require.Equal(t, 70, hpa.Spec.Metrics[0].Resource.Target.AverageUtilization)

	smObj := m.get(t, "ServiceMonitor", "ax")
	require.Equal(t, "monitoring.coreos.com/v1", smObj.APIVersion)
	require.Equal(t, "prometheus", smObj.Metadata.Labels["release"])
	sm := decode[serviceMonitor](t, smObj)
	require.Len(t, sm.Spec.Endpoints, 1)
	require.Equal(t, "http", sm.Spec.Endpoints[0].Port)
	require.Equal(t, "/metrics", sm.Spec.Endpoints[0].Path)
	requireSelects(t, sm.Spec.Selector.MatchLabels, m.get(t, "Service", "ax").Metadata.Labels)

	pdb := decode[podDisruptionBudget](t, m.get(t, "PodDisruptionBudget", "ax"))
	require.Equal(t, 2, pdb.Spec.MinAvailable)
}

func TestPublicKeys(t *testing.T) {
	t.Parallel()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	keys := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	file := filepath.Join(t.TempDir(), "keys.pem")
	require.NoError(t, os.WriteFile(file, []byte(keys), 0o600))
	m := render(t, "--set", "existingSecret=ax-secrets", "--set-file", "jwtPublicKeys="+file)

	cm := decode[configMap](t, m.get(t, "ConfigMap", "ax-jwt"))
	require.Len(t, cm.Data, 1)
	d := decode[deployment](t, m.get(t, "Deployment", "ax"))
	path := envOf(server(t, d))["AX_JWT_PUBLIC_KEYS"].Value
	require.NotEmpty(t, path)
	require.Equal(t, keys, cm.Data[filepath.Base(path)], "the PEM reaches the file unchanged")
	vol := mountedVolume(t, d.Spec.Template.Spec, server(t, d), filepath.Dir(path))
	require.NotNil(t, vol.ConfigMap)
	require.Equal(t, "ax-jwt", vol.ConfigMap.Name)

	// The hook gets the keys from its own copy: the ConfigMap does not exist
	// yet when a pre-install hook runs.
	require.Equal(t, map[string]string{filepath.Base(path): keys}, secretData(t, m.get(t, "Secret", "ax-migrate")))
	checkMigrationJob(t, m, "ax-secrets")
	js := decode[job](t, m.get(t, "Job", "ax-migrate")).Spec.Template.Spec
	migrate := js.Containers[0]
	require.Equal(t, path, envOf(migrate)["AX_JWT_PUBLIC_KEYS"].Value)
	vol = mountedVolume(t, js, migrate, filepath.Dir(path))
	require.NotNil(t, vol.Secret)
	require.Equal(t, "ax-migrate", vol.Secret.SecretName)
}

func TestOptionalParts(t *testing.T) {
	t.Parallel()
	t.Run("one replica has no PDB", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "replicaCount=1")
		require.False(t, m.has("PodDisruptionBudget", "ax"), "a PDB would block node drains")
		require.Equal(t, 1, *decode[deployment](t, m.get(t, "Deployment", "ax")).Spec.Replicas)
	})
	t.Run("migration off", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "migration.enabled=false")
		require.False(t, m.has("Job", "ax-migrate"))
		require.False(t, m.has("Secret", "ax-migrate"))
		d := decode[deployment](t, m.get(t, "Deployment", "ax"))
		require.Equal(t, "true", envOf(server(t, d))["AX_AUTO_MIGRATE"].Value, "without the hook the pods migrate")
	})
	t.Run("soft stop sets the grace period", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "shutdown.softStopSeconds=45", "--set", "shutdown.preStopSleepSeconds=0")
		d := decode[deployment](t, m.get(t, "Deployment", "ax"))
		require.Equal(t, "45s", envOf(server(t, d))["AX_SOFT_STOP_TIMEOUT"].Value)
		require.Nil(t, server(t, d).Lifecycle)
		checkServerPod(t, d)
	})
}

// TestRunnerValues: the example values render an ax runner whose pods the
// ax Service never selects, restricted like the server's, with its
// allowlist, its secret and the ax Service as its callback URL.
func TestRunnerValues(t *testing.T) {
	t.Parallel()
	require.False(t, render(t).has("Deployment", "ax-runner"), "off by default")
	m := render(t, "-f", filepath.Join(chartDir, "values-runner.yaml"))
	d := decode[deployment](t, m.get(t, "Deployment", "ax-runner"))
	require.Equal(t, "Recreate", d.Spec.Strategy.Type)
	labels := d.Spec.Template.Metadata.Labels
	requireSelects(t, d.Spec.Selector.MatchLabels, labels)
	requireSelects(t, decode[service](t, m.get(t, "Service", "ax-runner")).Spec.Selector, labels)
	require.False(t, selects(decode[service](t, m.get(t, "Service", "ax")).Spec.Selector, labels), "ax's Service never reaches a runner")
	require.False(t, selects(decode[deployment](t, m.get(t, "Deployment", "ax")).Spec.Selector.MatchLabels, labels))
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	c := d.Spec.Template.Spec.Containers[0]
	require.Equal(t, "registry.example.com/platform/ax-jobs:2026.12.1", c.Image)
	require.Equal(t, []string{
		"runner", "--listen=:8090", "--workers=8", "--grace=120s", "--kill-after=5s", "--state-dir=/var/lib/ax-runner",
		`--allow=/opt/jobs/[a-z0-9_-]+\.sh`, "--allow=/bin/sh", "--retry-exit-codes=75",
	}, c.Args)
	env := envOf(c)
	require.Equal(t, "http://ax:80", env["AX_URL"].Value)
	requireSecretRef(t, env, "AX_RUNNER_SECRETS", "ax-runner")
	require.Equal(t, 155, d.Spec.Template.Spec.TerminationGracePeriodSeconds, "grace + kill after + time to report")
	requireRestrictedPod(t, d.Spec.Template.Spec, c)
	mountedVolume(t, d.Spec.Template.Spec, c, "/var/lib/ax-runner")

	for _, tc := range []struct{ args []string }{
		{[]string{"--set", "runner.enabled=true", "--set", "runner.existingSecret=s"}},
		{[]string{"--set", "runner.enabled=true", "--set", "runner.allow={/bin/sh}"}},
	} {
		out, err := runHelm(t, append([]string{"template", release, chartDir}, tc.args...)...)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, out, "runner.", "%v", tc.args)
	}
}

func TestRejectedValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"chart-managed variable in config", []string{"--set", "config.AX_DATABASE_URL=postgres://x"}, "config.AX_DATABASE_URL"},
		{"short HS256 secret", []string{"--set", "secrets.jwtSecret=short"}, "at least 32 characters"},
		{"grace period under the shutdown", []string{"--set", "terminationGracePeriodSeconds=40"}, "must exceed"},
		{"both secret sources", []string{"--set", "existingSecret=s", "--set", "secrets.databaseURL=postgres://x"}, "not both"},
		{"HPA bounds", []string{"--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=5", "--set", "autoscaling.maxReplicas=2"}, "minReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := runHelm(t, append([]string{"template", release, chartDir}, tc.args...)...)
			require.Error(t, err)
			require.Contains(t, out, tc.want)
		})
	}
}

// checkServerPod checks what every rendering of the Deployment must have.
func checkServerPod(t *testing.T, d deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := server(t, d)
	require.Equal(t, []string{"serve"}, c.Args)
	require.Contains(t, c.Ports, containerPort{Name: "http", ContainerPort: 8080})
	env := envOf(c)
	require.Equal(t, ":8080", env["AX_HTTP_ADDR"].Value)

	for name, p := range map[string]*probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		require.NotNil(t, p, name)
		require.Equal(t, "http", p.HTTPGet.Port, name)
	}
	require.Equal(t, "/healthz", c.StartupProbe.HTTPGet.Path)
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)

	// Shutdown: the kubelet must not kill ax before the preStop sleep, the
	// HTTP drain and River's soft stop are over.
	shutdown, err := time.ParseDuration(env["AX_SHUTDOWN_TIMEOUT"].Value)
	require.NoError(t, err, "AX_SHUTDOWN_TIMEOUT")
	softStop, err := time.ParseDuration(env["AX_SOFT_STOP_TIMEOUT"].Value)
	require.NoError(t, err, "AX_SOFT_STOP_TIMEOUT")
	need := shutdown + softStop
	if c.Lifecycle != nil {
		need += time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	require.Greater(t, time.Duration(spec.TerminationGracePeriodSeconds)*time.Second, need)

	requireRestrictedPod(t, spec, c)
	require.False(t, *spec.AutomountServiceAccountToken)
}

// checkMigrationJob checks the hook Job: `ax migrate` with the server's
// image before install and upgrade, with the database and JWT settings from
// credSecret, after the hook Secret (when the chart renders one) exists.
func checkMigrationJob(t *testing.T, m manifests, credSecret string) {
	t.Helper()
	jobObj := m.get(t, "Job", "ax-migrate")
	a := jobObj.Metadata.Annotations
	require.ElementsMatch(t, []string{"pre-install", "pre-upgrade"}, strings.Split(a["helm.sh/hook"], ","))
	require.Contains(t, strings.Split(a["helm.sh/hook-delete-policy"], ","), "before-hook-creation")
	jobWeight, err := strconv.Atoi(a["helm.sh/hook-weight"])
	require.NoError(t, err, "hook weight")
	if hookSecret, ok := m.find("Secret", "ax-migrate"); ok {
		ha := hookSecret.Metadata.Annotations
		require.Equal(t, a["helm.sh/hook"], ha["helm.sh/hook"], "the hook Secret exists whenever the Job runs")
		secretWeight, err := strconv.Atoi(ha["helm.sh/hook-weight"])
		require.NoError(t, err)
		require.Less(t, secretWeight, jobWeight, "the hook Secret is created before the Job")
	}

	j := decode[job](t, jobObj)
	spec := j.Spec.Template.Spec
	require.Equal(t, "Never", spec.RestartPolicy)
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	require.Equal(t, []string{"migrate"}, c.Args)
	require.Equal(t, server(t, decode[deployment](t, m.get(t, "Deployment", "ax"))).Image, c.Image)
	env := envOf(c)
	requireSecretRef(t, env, "AX_DATABASE_URL", credSecret)
	requireSecretRef(t, env, "AX_JWT_SECRET", credSecret)
	require.Empty(t, c.EnvFrom, "the release's ConfigMap does not exist yet when a pre-install hook runs")
	require.Contains(t, env, "AX_LOG_LEVEL", "config values are passed inline")
	requireRestrictedPod(t, spec, c)
}

func requireRestrictedPod(t *testing.T, spec podSpec, c container) {
	t.Helper()
	ps := spec.SecurityContext
	require.True(t, *ps.RunAsNonRoot)
	require.Equal(t, int64(65532), *ps.RunAsUser)
	require.Equal(t, "RuntimeDefault", ps.SeccompProfile.Type)
	cs := c.SecurityContext
	require.True(t, *cs.RunAsNonRoot)
	require.Equal(t, int64(65532), *cs.RunAsUser)
	require.True(t, *cs.ReadOnlyRootFilesystem)
	require.False(t, *cs.AllowPrivilegeEscalation)
	require.Equal(t, []string{"ALL"}, cs.Capabilities.Drop)
	require.Equal(t, "RuntimeDefault", cs.SeccompProfile.Type)
	tmp := mountedVolume(t, spec, c, "/tmp")
	require.NotNil(t, tmp.EmptyDir, "/tmp is writable on a read-only root")
}

func requireSecretRef(t *testing.T, env map[string]envVar, name, secret string) {
	t.Helper()
	v, ok := env[name]
	require.True(t, ok, "%s is not set", name)
	require.NotNil(t, v.ValueFrom, name)
	require.NotNil(t, v.ValueFrom.SecretKeyRef, name)
	require.Equal(t, secret, v.ValueFrom.SecretKeyRef.Name, name)
	require.Equal(t, name, v.ValueFrom.SecretKeyRef.Key, name)
}

func requireEnvFromConfigMap(t *testing.T, c container, name string) {
	t.Helper()
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil && e.ConfigMapRef.Name == name {
			return
		}
	}
	t.Fatalf("container %s: no envFrom ConfigMap %s", c.Name, name)
}

func requireSelects(t *testing.T, selector, labels map[string]string) {
	t.Helper()
	require.NotEmpty(t, selector)
	require.True(t, selects(selector, labels), "selector %v does not match labels %v", selector, labels)
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func mountedVolume(t *testing.T, spec podSpec, c container, path string) volume {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name {
				return v
			}
		}
		t.Fatalf("mount %s refers to a missing volume %s", path, m.Name)
	}
	t.Fatalf("container %s mounts nothing at %s", c.Name, path)
	return volume{}
}

func server(t *testing.T, d deployment) container {
	t.Helper()
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	return d.Spec.Template.Spec.Containers[0]
}

func envOf(c container) map[string]envVar {
	m := make(map[string]envVar, len(c.Env))
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func secretData(t *testing.T, o object) map[string]string {
	t.Helper()
	s := decode[secret](t, o)
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		require.NoError(t, err, "secret key %s", k)
		out[k] = string(b)
	}
	return out
}

func appVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var c struct {
		AppVersion string `yaml:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(b, &c))
	require.NotEmpty(t, c.AppVersion)
	return c.AppVersion
}

// --- rendering ---

// object is one rendered manifest.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
	node       *yaml.Node
}

type manifests []object

func (m manifests) has(kind, name string) bool {
	_, ok := m.find(kind, name)
	return ok
}

func (m manifests) find(kind, name string) (object, bool) {
	for _, o := range m {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return object{}, false
}

func (m manifests) get(t *testing.T, kind, name string) object {
	t.Helper()
	o, ok := m.find(kind, name)
	require.True(t, ok, "no %s %s rendered", kind, name)
	return o
}

func decode[T any](t *testing.T, o object) T {
	t.Helper()
	var v T
	require.NoError(t, o.node.Decode(&v), "decode %s %s", o.Kind, o.Metadata.Name)
	return v
}

// render runs `helm template` with args and parses its output.
func render(t *testing.T, args ...string) manifests {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	require.NoError(t, err, out)
	var m manifests
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
			continue // an empty document
		}
		o := object{node: &n}
		require.NoError(t, n.Decode(&o))
		require.NotEmpty(t, o.Kind)
		require.False(t, m.has(o.Kind, o.Metadata.Name), "%s %s rendered twice", o.Kind, o.Metadata.Name)
		m = append(m, o)
	}
	require.NotEmpty(t, m)
	return m
}

// runHelm runs helm with its state kept in a temporary directory and no
// cluster to talk to; it returns stdout and stderr together.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := helmBinary()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// helmBinary finds helm v3 on PATH or in GOBIN, or installs it there.
var helmBinary = sync.OnceValues(func() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if p, err := exec.LookPath("helm"); err == nil && isHelm3(ctx, p) {
		return p, nil
	}
	gobin, err := goEnv(ctx, "GOBIN")
	if err != nil {
		return "", err
	}
	if gobin == "" {
		gopath, err := goEnv(ctx, "GOPATH")
		if err != nil {
			return "", err
		}
		gobin = filepath.Join(filepath.SplitList(gopath)[0], "bin")
	}
	p := filepath.Join(gobin, "helm")
	if isHelm3(ctx, p) {
		return p, nil
	}
	// Outside the module, so that ax's go.mod is neither read nor changed.
	cmd := exec.CommandContext(ctx, "go", "install", helmModule+"@"+helmVersion)
	cmd.Dir = os.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", helmModule, helmVersion, err, out)
	}
	if !isHelm3(ctx, p) {
		return "", fmt.Errorf("installed helm is not at %s", p)
	}
	return p, nil
})

func isHelm3(ctx context.Context, path string) bool {
	out, err := exec.CommandContext(ctx, path, "version", "--short").Output()
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(out)), "v3.")
}

func goEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// --- the fields of the Kubernetes objects the tests look at ---

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type deployment struct {
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			Type          string `yaml:"type"`
			RollingUpdate struct {
				MaxUnavailable any `yaml:"maxUnavailable"`
				MaxSurge       any `yaml:"maxSurge"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Selector labelSelector `yaml:"selector"`
		Template podTemplate   `yaml:"template"`
	} `yaml:"spec"`
}

type job struct {
	Spec struct {
		Template podTemplate `yaml:"template"`
	} `yaml:"spec"`
}

type podTemplate struct {
	Metadata meta    `yaml:"metadata"`
	Spec     podSpec `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int             `yaml:"terminationGracePeriodSeconds"`
	ServiceAccountName            string          `yaml:"serviceAccountName"`
	AutomountServiceAccountToken  *bool           `yaml:"automountServiceAccountToken"`
	RestartPolicy                 string          `yaml:"restartPolicy"`
	SecurityContext               securityContext `yaml:"securityContext"`
	Containers                    []container     `yaml:"containers"`
	Volumes                       []volume        `yaml:"volumes"`
	Affinity                      struct {
		PodAntiAffinity struct {
			Preferred []any `yaml:"preferredDuringSchedulingIgnoredDuringExecution"`
		} `yaml:"podAntiAffinity"`
	} `yaml:"affinity"`
	TopologySpreadConstraints []any `yaml:"topologySpreadConstraints"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

type container struct {
	Name    string          `yaml:"name"`
	Image   string          `yaml:"image"`
	Args    []string        `yaml:"args"`
	Ports   []containerPort `yaml:"ports"`
	Env     []envVar        `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Lifecycle      *struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext securityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type containerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type volume struct {
	Name      string    `yaml:"name"`
	EmptyDir  *struct{} `yaml:"emptyDir"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type configMap struct {
	Data map[string]string `yaml:"data"`
}

type secret struct {
	Data map[string]string `yaml:"data"`
}

type service struct {
	Spec struct {
		Type     string            `yaml:"type"`
		Ports    []port            `yaml:"ports"`
		Selector map[string]string `yaml:"selector"`
	} `yaml:"spec"`
}

type port struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort any    `yaml:"targetPort"`
}

type podDisruptionBudget struct {
	Spec struct {
		MinAvailable int           `yaml:"minAvailable"`
		Selector     labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type horizontalPodAutoscaler struct {
	Spec struct {
		ScaleTargetRef struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas int `yaml:"minReplicas"`
		MaxReplicas int `yaml:"maxReplicas"`
		Metrics     []struct {
			Resource struct {
				Name   string `yaml:"name"`
				Target struct {
					AverageUtilization int `yaml:"averageUtilization"`
				} `yaml:"target"`
			} `yaml:"resource"`
		} `yaml:"metrics"`
	} `yaml:"spec"`
}

type serviceMonitor struct {
	Spec struct {
		Selector  labelSelector `yaml:"selector"`
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}
