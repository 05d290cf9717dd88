package helmtest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The collector roles and the config each runs, as shipped in configs/.
var collectorRoles = []string{"receiver", "pipeline", "sink"}

const (
	release      = "otelcol-svc" // holds the chart's name, so objects are otelcol-svc-<role>
	configDir    = "/etc/otelcol-svc"
	nonRootUID   = int64(10001)
	gracePeriod  = int64(30)
	healthPort   = int32(13133)
	externalName = "otelcol-svc-external" // the Secret ci/external-values.yaml names
)

// valueSets are the chart's CI value files (chart-testing's ci/ convention) and the
// defaults; every test that renders runs over each.
var valueSets = []struct {
	name string
	args []string
}{
	{"default", nil},
	{"external", []string{"-f", filepath.Join(chartDir, "ci/external-values.yaml")}},
	{"scale-out", []string{"-f", filepath.Join(chartDir, "ci/scale-out-values.yaml")}},
}

// The chart's copies of the role configs must be the shipped ones byte for byte, so the
// chart runs exactly what configs/ documents and tests.
func TestChartConfigsAreTheShippedConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "files", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs in the chart's files/: %v", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for _, role := range collectorRoles {
		if !slices.Contains(names, role+".yaml") {
			t.Errorf("the chart carries no files/%s.yaml", role)
		}
	}
	for _, name := range names {
		chartCopy, err := os.ReadFile(filepath.Join(chartDir, "files", name))
		if err != nil {
			t.Fatal(err)
		}
		shipped, err := os.ReadFile(filepath.Join(configsDir, name))
		if err != nil {
			t.Errorf("files/%s has no counterpart in configs/: %v", name, err)
			continue
		}
		if !bytes.Equal(chartCopy, shipped) {
			t.Errorf("deploy/helm/otelcol-svc/files/%s differs from configs/%s: copy it again "+
				"(cp configs/%s deploy/helm/otelcol-svc/files/)", name, name, name)
		}
	}
}

// The decoding the render tests rest on refuses what the API server would: a field the
// type does not have, and a kind it does not know.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	good := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 1\n"
	if _, err := decodeStrict([]byte(good)); err != nil {
		t.Fatalf("a valid Deployment did not decode: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":  "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicaz: 1\n",
		"duplicate key":  "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 1\n  replicas: 2\n",
		"misplaced key":  "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nports: []\n",
		"unknown kind":   "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: x}\n",
		"wrong type":     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: two\n",
		"probe misspelt": "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: c\n    readinesProbe: {}\n",
	} {
		if _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestHelmLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			out, errOut, err := runHelm(t, append([]string{"lint", "--strict", chartDir}, vs.args...)...)
			if err != nil {
				t.Fatalf("helm lint --strict: %v\n%s%s", err, out, errOut)
			}
		})
	}
}

func TestRenderedObjects(t *testing.T) {
	shipped := map[string]string{}
	for _, role := range collectorRoles {
		b, err := os.ReadFile(filepath.Join(configsDir, role+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		shipped[role] = string(b)
	}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := decodeAll(t, template(t, vs.args...))
			for _, role := range append(slices.Clone(collectorRoles), "controlplane") {
				if r.deployments[release+"-"+role] == nil {
					t.Fatalf("no Deployment %s-%s", release, role)
				}
			}
			for name, d := range r.deployments {
				checkPod(t, name, d)
			}
			checkSecretRefs(t, r)
			checkSelectors(t, r)
			checkNames(t, r)

			for _, role := range collectorRoles {
				d := r.deployments[release+"-"+role]
				c := d.Spec.Template.Spec.Containers[0]
				if want := []string{"--config", configDir + "/" + role + ".yaml"}; !slices.Equal(c.Args, want) {
					t.Errorf("%s: args %v, want %v", role, c.Args, want)
				}
				cm := r.configMaps[release+"-"+role]
				if cm == nil {
					t.Fatalf("%s: no ConfigMap", role)
				}
				if cm.Data[role+".yaml"] != shipped[role] {
					t.Errorf("%s: the ConfigMap's %s.yaml is not configs/%s.yaml byte for byte", role, role, role)
				}
				if !mountsConfigMap(d, cm.Name, configDir) {
					t.Errorf("%s: ConfigMap %s is not mounted at %s", role, cm.Name, configDir)
				}
				for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/" || containerPort(c, p.HTTPGet.Port.String()) != healthPort {
						t.Errorf("%s: probe %+v is not the health_check extension (GET / on %d)", role, p, healthPort)
					}
				}
			}
			cp := r.deployments[release+"-controlplane"].Spec.Template.Spec.Containers[0]
			for _, pc := range []struct {
				name, path string
				probe      *corev1.Probe
			}{{"readiness", "/readyz", cp.ReadinessProbe}, {"liveness", "/healthz", cp.LivenessProbe}} {
				if pc.probe == nil || pc.probe.HTTPGet == nil || pc.probe.HTTPGet.Path != pc.path ||
					containerPort(cp, pc.probe.HTTPGet.Port.String()) != 8080 {
					t.Errorf("control plane %s is not GET %s on 8080: %+v", pc.name, pc.path, pc.probe)
				}
			}
			checkServicePorts(t, r.services[release+"-receiver"], map[string]int32{"otlp-http": 4318, "otlp-grpc": 4317})
			checkServicePorts(t, r.services[release+"-controlplane"], map[string]int32{"http": 8080})
			for _, role := range []string{"receiver", "pipeline", "sink", "controlplane"} {
				if r.pdbs[release+"-"+role] == nil {
					t.Errorf("no PodDisruptionBudget for %s", role)
				}
			}

			switch vs.name {
			case "default":
				if len(r.hpas)+len(r.ingresses)+len(r.httpRoutes)+len(r.grpcRoutes) != 0 {
					t.Errorf("defaults rendered HPAs %v, Ingresses %v, routes %v %v, want none",
						keys(r.hpas), keys(r.ingresses), keys(r.httpRoutes), keys(r.grpcRoutes))
				}
				s := r.secrets[release]
				if s == nil || string(s.Data["nats-url"]) != "nats://otelcol-svc-nats:4222" {
					t.Errorf("default NATS URL is not the NATS chart's service for the release: %v", s)
				}
				if env(cp, "DATABASE_URL") != nil || env(r.deployments[release+"-pipeline"].Spec.Template.Spec.Containers[0], "REDIS_URL") != nil {
					t.Error("DATABASE_URL or REDIS_URL set although no PostgreSQL or Redis was given")
				}
				if got := replicas(r.deployments[release+"-receiver"]); got != 2 {
					t.Errorf("receiver replicas %d, want 2", got)
				}
			case "external":
				if len(r.secrets) != 0 {
					t.Errorf("every value names an existingSecret, yet the chart rendered Secrets %v", keys(r.secrets))
				}
				for dep, vars := range map[string][]string{
					"controlplane": {"NATS_URL", "DATABASE_URL", "SVC_JWT_SECRET"},
					"pipeline":     {"NATS_URL", "REDIS_URL"},
					"receiver":     {"NATS_URL", "SERVICE_INGEST_TOKEN"},
					"sink":         {"NATS_URL"},
				} {
					c := r.deployments[release+"-"+dep].Spec.Template.Spec.Containers[0]
					for _, v := range vars {
						e := env(c, v)
						if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != externalName {
							t.Errorf("%s: %s is not read from Secret %s: %+v", dep, v, externalName, e)
						}
					}
				}
				if e := env(cp, "SVC_STREAM_MAX_AGE"); e == nil || e.Value != "72h" {
					t.Errorf("control plane SVC_STREAM_MAX_AGE %+v, want 72h (streams.maxAge)", e)
				}
			case "scale-out":
				for _, role := range []string{"receiver", "pipeline"} {
					d := r.deployments[release+"-"+role]
					h := r.hpas[release+"-"+role]
					if h == nil || h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != d.Name {
						t.Errorf("%s: no HorizontalPodAutoscaler scaling its Deployment: %+v", role, h)
						continue
					}
					if d.Spec.Replicas != nil {
						t.Errorf("%s: Deployment sets replicas %d although its HPA owns them", role, *d.Spec.Replicas)
					}
					if len(h.Spec.Metrics) == 0 {
						t.Errorf("%s: HPA without metrics", role)
					}
				}
				if len(r.hpas) != 2 {
					t.Errorf("HPAs %v, want the receiver's and the pipeline's only", keys(r.hpas))
				}
				if got := replicas(r.deployments[release+"-sink"]); got != 4 {
					t.Errorf("sink replicas %d, want 4", got)
				}
				if e := env(r.deployments[release+"-receiver"].Spec.Template.Spec.Containers[0], "SVC_MEMORY_LIMIT_MIB"); e == nil || e.Value != "896" {
					t.Errorf("receiver env SVC_MEMORY_LIMIT_MIB %+v, want 896", e)
				}
				checkIngress(t, r, map[string]string{"cp.example.com": release + "-controlplane", "ingest.example.com": release + "-receiver"})
				checkRoutes(t, r)
			}
		})
	}
}

// A wrong value is refused when the chart is rendered, naming what is wrong, and the same
// command with a right value renders (so it is the value that is refused).
func TestWrongValuesAreRefused(t *testing.T) {
	typo := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(typo, []byte("receiver:\n  replicaz: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		bad   []string
		good  []string
		names string // in helm's message
	}{
		{"negative replicas", []string{"--set", "receiver.replicas=-1"}, []string{"--set", "receiver.replicas=0"}, "replicas"},
		{"misspelt key", []string{"-f", typo}, []string{"--set", "receiver.replicas=2"}, "replicaz"},
		{"wrong type", []string{"--set-string", "sink.replicas=two"}, []string{"--set", "sink.replicas=3"}, "replicas"},
		{"unknown top-level key", []string{"--set", "replicaCount=3"}, nil, "replicaCount"},
		{"port out of range", []string{"--set", "controlplane.service.port=70000"}, []string{"--set", "controlplane.service.port=80"}, "port"},
		{"wrong enum", []string{"--set", "image.pullPolicy=Sometimes"}, []string{"--set", "image.pullPolicy=Always"}, "pullPolicy"},
		{"pipelines without Redis", []string{"--set", "pipeline.replicas=2"},
			[]string{"--set", "pipeline.replicas=2", "--set", "redis.url=redis://redis:6379/0"}, "Redis"},
		{"control planes without PostgreSQL", []string{"--set", "controlplane.replicas=2"},
			[]string{"--set", "controlplane.replicas=2", "--set", "postgresql.url=postgres://u:p@db:5432/svc"}, "PostgreSQL"},
		{"Gateway API routes without a Gateway", []string{"--set", "gatewayAPI.enabled=true"},
			[]string{"--set", "gatewayAPI.enabled=true", "--set", "gatewayAPI.parentRefs[0].name=gw"}, "parentRefs"},
		{"short JWT secret", []string{"--set", "controlplane.jwtSecret=short"},
			[]string{"--set", "controlplane.jwtSecret=" + strings.Repeat("x", 32)}, "32 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, err := runHelm(t, append([]string{"template", release, chartDir}, tc.bad...)...)
			if err == nil {
				t.Fatalf("helm template %v succeeded", tc.bad)
			}
			if !strings.Contains(errOut, tc.names) {
				t.Errorf("helm's error does not name %q:\n%s", tc.names, errOut)
			}
			if tc.good != nil {
				decodeAll(t, template(t, tc.good...))
			}
		})
	}
}

// checkPod asserts what every pod of the chart must have: probes, resources, a
// non-root read-only root, writable emptyDirs for the data dir and /tmp, and the grace
// period the roles' drain fits in.
func checkPod(t *testing.T, name string, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		t.Fatalf("%s: no containers", name)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != gracePeriod {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want %d", name, spec.TerminationGracePeriodSeconds, gracePeriod)
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Errorf("%s: Kubernetes adds <SERVICE>_PORT variables to its environment (enableServiceLinks)", name)
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		where := name + "/" + c.Name
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s: liveness %v, readiness %v: both are required", where, c.LivenessProbe != nil, c.ReadinessProbe != nil)
		} else {
			for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
				if p.HTTPGet == nil || containerPort(c, p.HTTPGet.Port.String()) == 0 {
					t.Errorf("%s: probe %+v does not GET a port the container serves", where, p.ProbeHandler)
				}
			}
			if c.LivenessProbe.FailureThreshold*c.LivenessProbe.PeriodSeconds < 30 {
				t.Errorf("%s: liveness gives up after %d s: a short NATS or database blip would restart it",
					where, c.LivenessProbe.FailureThreshold*c.LivenessProbe.PeriodSeconds)
			}
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[res]; !ok || q.IsZero() {
				t.Errorf("%s: no %s request", where, res)
			}
			if q, ok := c.Resources.Limits[res]; !ok || q.IsZero() {
				t.Errorf("%s: no %s limit", where, res)
			}
		}
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", where)
			continue
		}
		if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
			t.Errorf("%s: runAsNonRoot is not set", where)
		}
		uid := psc.RunAsUser
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if uid == nil || *uid != nonRootUID {
			t.Errorf("%s: runs as uid %v, want %d", where, uid, nonRootUID)
		}
		if !isTrue(sc.ReadOnlyRootFilesystem) {
			t.Errorf("%s: root file system is writable", where)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: privilege escalation is allowed", where)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: capabilities are not all dropped", where)
		}
		// Where the process writes, the read-only root must not be: the data dir it is
		// told and /tmp are emptyDirs.
		dataDir := ""
		if e := env(c, "SVC_DATA_DIR"); e != nil {
			dataDir = e.Value
		}
		if dataDir == "" {
			t.Errorf("%s: SVC_DATA_DIR is not set", where)
		}
		for _, dir := range []string{dataDir, "/tmp"} {
			ok := false
			for _, m := range c.VolumeMounts {
				if m.MountPath == dir && !m.ReadOnly && volumes[m.Name].EmptyDir != nil {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: %s is not a writable emptyDir", where, dir)
			}
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s: mounts volume %s, which the pod does not have", where, m.Name)
			}
		}
		if e := env(c, "NATS_URL"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: NATS_URL (which may carry credentials) is not read from a Secret: %+v", where, e)
		}
		names := map[string]bool{}
		for _, e := range c.Env {
			if names[e.Name] {
				t.Errorf("%s: %s is set twice", where, e.Name)
			}
			names[e.Name] = true
		}
	}
}

// checkNames asserts what the API server checks beyond the types: names, label values
// and port names of the right form and length.
func checkNames(t *testing.T, r *rendered) {
	t.Helper()
	for _, obj := range r.all {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		check := validation.IsDNS1123Subdomain
		if _, ok := obj.(*corev1.Service); ok {
			check = validation.IsDNS1035Label
		}
		for _, msg := range check(m.GetName()) {
			t.Errorf("%s name %q: %s", kind, m.GetName(), msg)
		}
		for k, v := range m.GetLabels() {
			for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
				t.Errorf("%s %s: label %s=%q: %s", kind, m.GetName(), k, v, msg)
			}
		}
	}
	for name, d := range r.deployments {
		for k, v := range d.Spec.Template.Labels {
			for _, msg := range validation.IsValidLabelValue(v) {
				t.Errorf("Deployment %s: pod label %s=%q: %s", name, k, v, msg)
			}
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, msg := range validation.IsDNS1123Label(c.Name) {
				t.Errorf("Deployment %s: container name %q: %s", name, c.Name, msg)
			}
			for _, p := range c.Ports {
				for _, msg := range validation.IsValidPortName(p.Name) {
					t.Errorf("Deployment %s: port name %q: %s", name, p.Name, msg)
				}
			}
		}
	}
	for name, s := range r.services {
		for _, p := range s.Spec.Ports {
			for _, msg := range validation.IsDNS1123Label(p.Name) {
				t.Errorf("Service %s: port name %q: %s", name, p.Name, msg)
			}
		}
	}
}

// A release name of the longest kind Helm takes (53 characters) still gives every object
// a valid name, the role kept at the end so the objects stay apart.
func TestLongReleaseNamesGiveValidNames(t *testing.T) {
	long := "a-release-name-of-fifty-three-characters-for-the-tes"
	if len(long) != 52 {
		t.Fatalf("len %d", len(long))
	}
	long += "t"
	out, errOut, err := runHelm(t, "template", long, chartDir)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, errOut)
	}
	r := decodeAll(t, out)
	checkNames(t, r)
	checkSelectors(t, r)
	for _, role := range []string{"receiver", "pipeline", "sink", "controlplane"} {
		found := false
		for name := range r.deployments {
			if strings.HasSuffix(name, "-"+role) {
				found = true
			}
		}
		if !found {
			t.Errorf("no Deployment named ...-%s: %v", role, keys(r.deployments))
		}
	}
}

// checkSecretRefs asserts that every secretKeyRef names a key the chart's Secret holds,
// or a Secret the values name as existing (which the chart must not render).
func checkSecretRefs(t *testing.T, r *rendered) {
	t.Helper()
	for name, d := range r.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				if s := r.secrets[ref.Name]; s != nil {
					if _, ok := s.Data[ref.Key]; !ok {
						t.Errorf("%s: %s reads key %s of Secret %s, which has keys %v", name, e.Name, ref.Key, ref.Name, keys(s.Data))
					}
				} else if ref.Name != externalName {
					t.Errorf("%s: %s reads Secret %s, which is neither rendered nor an existingSecret of the values", name, e.Name, ref.Name)
				}
			}
		}
	}
}

// checkSelectors asserts that each Service and PodDisruptionBudget selects the pods of
// exactly one Deployment, and each Deployment's selector its own pods.
func checkSelectors(t *testing.T, r *rendered) {
	t.Helper()
	matching := func(sel labels.Selector) []string {
		var out []string
		for name, d := range r.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				out = append(out, name)
			}
		}
		return out
	}
	for name, d := range r.deployments {
		if got := matching(labels.SelectorFromSet(d.Spec.Selector.MatchLabels)); !slices.Equal(got, []string{name}) {
			t.Errorf("Deployment %s's selector matches the pods of %v", name, got)
		}
	}
	for name, s := range r.services {
		got := matching(labels.SelectorFromSet(s.Spec.Selector))
		if len(got) != 1 || got[0] != name {
			t.Errorf("Service %s selects the pods of %v, want %s's", name, got, name)
			continue
		}
		c := r.deployments[got[0]].Spec.Template.Spec.Containers[0]
		for _, p := range s.Spec.Ports {
			if containerPort(c, p.TargetPort.String()) == 0 {
				t.Errorf("Service %s port %s targets %s, which the container does not serve", name, p.Name, p.TargetPort.String())
			}
		}
	}
	for name, p := range r.pdbs {
		sel := labels.SelectorFromSet(p.Spec.Selector.MatchLabels)
		if got := matching(sel); !slices.Equal(got, []string{name}) {
			t.Errorf("PodDisruptionBudget %s selects the pods of %v", name, got)
		}
	}
}

func checkServicePorts(t *testing.T, s *corev1.Service, want map[string]int32) {
	t.Helper()
	if s == nil {
		t.Errorf("no Service for ports %v", want)
		return
	}
	got := map[string]int32{}
	for _, p := range s.Spec.Ports {
		got[p.Name] = p.Port
	}
	for n, port := range want {
		if got[n] != port {
			t.Errorf("Service %s: port %s is %d, want %d", s.Name, n, got[n], port)
		}
	}
}

func checkIngress(t *testing.T, r *rendered, hosts map[string]string) {
	t.Helper()
	if len(r.ingresses) != 1 {
		t.Fatalf("Ingresses %v, want one", keys(r.ingresses))
	}
	for _, ing := range r.ingresses {
		seen := map[string]bool{}
		for _, rule := range ing.Spec.Rules {
			want, ok := hosts[rule.Host]
			if !ok {
				t.Errorf("Ingress rule for unexpected host %q", rule.Host)
				continue
			}
			seen[rule.Host] = true
			for _, p := range rule.HTTP.Paths {
				b := p.Backend.Service
				svc := r.services[b.Name]
				if b.Name != want || svc == nil {
					t.Errorf("host %s routes to Service %s, want %s (rendered)", rule.Host, b.Name, want)
					continue
				}
				if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == b.Port.Number }) {
					t.Errorf("host %s routes to port %d, which Service %s does not have", rule.Host, b.Port.Number, b.Name)
				}
			}
		}
		for h := range hosts {
			if !seen[h] {
				t.Errorf("Ingress has no rule for %s", h)
			}
		}
		if len(ing.Spec.TLS) == 0 {
			t.Error("Ingress has no TLS although the values give one")
		}
	}
}

// checkRoutes asserts the scale-out values' Gateway API routes: the control plane's and
// the receiver's OTLP/HTTP as HTTPRoutes, its OTLP/gRPC as a GRPCRoute, each to a
// rendered Service's port, attached to the Gateway the values name.
func checkRoutes(t *testing.T, r *rendered) {
	t.Helper()
	type backend struct {
		svc  string
		port int32
	}
	got := map[string]backend{}
	var parents []string
	add := func(kind, name string, hostnames []gatewayv1.Hostname, refs []gatewayv1.ParentReference, backends []gatewayv1.BackendRef) {
		for _, p := range refs {
			parents = append(parents, kind+" "+name+" -> "+string(p.Name))
		}
		for _, b := range backends {
			for _, h := range hostnames {
				got[kind+" "+string(h)] = backend{string(b.Name), int32(*b.Port)}
			}
		}
	}
	for name, rt := range r.httpRoutes {
		for _, rule := range rt.Spec.Rules {
			var refs []gatewayv1.BackendRef
			for _, b := range rule.BackendRefs {
				refs = append(refs, b.BackendRef)
			}
			add("HTTPRoute", name, rt.Spec.Hostnames, rt.Spec.ParentRefs, refs)
		}
	}
	for name, rt := range r.grpcRoutes {
		for _, rule := range rt.Spec.Rules {
			var refs []gatewayv1.BackendRef
			for _, b := range rule.BackendRefs {
				refs = append(refs, b.BackendRef)
			}
			add("GRPCRoute", name, rt.Spec.Hostnames, rt.Spec.ParentRefs, refs)
		}
	}
	want := map[string]backend{
		"HTTPRoute cp.example.com":     {release + "-controlplane", 8080},
		"HTTPRoute ingest.example.com": {release + "-receiver", 4318},
		"GRPCRoute otlp.example.com":   {release + "-receiver", 4317},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s routes to %+v, want %+v", k, got[k], w)
		}
		svc := r.services[w.svc]
		if svc == nil || !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == w.port }) {
			t.Errorf("%s: Service %s has no port %d", k, w.svc, w.port)
		}
	}
	if len(got) != len(want) {
		t.Errorf("routes %v, want %v", got, want)
	}
	if len(parents) != len(r.httpRoutes)+len(r.grpcRoutes) {
		t.Errorf("each route must attach to the one Gateway given: %v", parents)
	}
}

func mountsConfigMap(d *appsv1.Deployment, cm, path string) bool {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != cm {
			continue
		}
		for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
			if m.Name == v.Name && m.MountPath == path {
				return true
			}
		}
	}
	return false
}

// containerPort is the number of the container's port named (or numbered) p, 0 if none.
func containerPort(c corev1.Container, p string) int32 {
	for _, cp := range c.Ports {
		if cp.Name == p || (p != "" && p == strconv.Itoa(int(cp.ContainerPort))) {
			return cp.ContainerPort
		}
	}
	return 0
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

func isTrue(b *bool) bool { return b != nil && *b }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The sink runs with GOGC=200 (its small live heap made Go's default GC a tenth of its
// CPU per delivery); the other roles keep Go's default, and an operator's value wins.
func TestSinkGCSetting(t *testing.T) {
	gogc := func(r *rendered, role string) (string, bool) {
		for _, e := range r.deployments[release+"-"+role].Spec.Template.Spec.Containers[0].Env {
			if e.Name == "GOGC" {
				return e.Value, true
			}
		}
		return "", false
	}
	r := decodeAll(t, template(t))
	if v, ok := gogc(r, "sink"); !ok || v != "200" {
		t.Errorf("sink: GOGC %q (set %v), want 200", v, ok)
	}
	for _, role := range []string{"receiver", "pipeline", "controlplane"} {
		if v, ok := gogc(r, role); ok {
			t.Errorf("%s: GOGC %q set, want Go's default", role, v)
		}
	}
	r = decodeAll(t, template(t, "--set", "sink.env.GOGC=100"))
	if v, _ := gogc(r, "sink"); v != "100" {
		t.Errorf("sink with sink.env.GOGC=100: GOGC %q", v)
	}
}
