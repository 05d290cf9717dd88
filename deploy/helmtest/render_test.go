package helmtest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// Paths from this package's directory (go test runs in it).
const (
	chartDir   = "../helm/otelcol-svc"
	configsDir = "../../configs"
	repoBin    = "../../bin"
)

// helm is the helm binary: bin/helm (make helm) first, else one on PATH. Without one the
// tests skip, except under CI=true, where a missing helm is a failure: CI builds it.
func helm(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join(repoBin, "helm")); err == nil {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("helm not found in bin/ or on PATH: run `make helm` (CI must run the chart's tests)")
	}
	t.Skip("helm not found in bin/ or on PATH: run `make helm` to build the pinned one")
	return ""
}

// runHelm runs helm with a HOME of its own, so nothing of the user's helm setup
// (repositories, plugins, caches) changes what it renders.
func runHelm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin := helm(t)
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HOME="+home,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// template renders the chart as release "otelcol-svc" with the given extra arguments
// (-f files, --set) and fails the test if helm does.
func template(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runHelm(t, append([]string{"template", "otelcol-svc", chartDir, "--namespace", "svc"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, errOut)
	}
	return out
}

// scheme knows every kind the chart may render; anything else is an error.
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, autoscalingv2.AddToScheme,
		policyv1.AddToScheme, networkingv1.AddToScheme, gatewayv1.Install,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	// Strict: an unknown or duplicated field is an error, not silently dropped, so a
	// misspelt or misplaced key in a template fails here as the API server would refuse it.
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// decodeStrict decodes one YAML document into its Kubernetes API type.
func decodeStrict(doc []byte) (runtime.Object, error) {
	obj, _, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
	return obj, err
}

// rendered is what the chart rendered, by kind.
type rendered struct {
	all          []runtime.Object
	deployments  map[string]*appsv1.Deployment
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	ingresses    map[string]*networkingv1.Ingress
	serviceAccts map[string]*corev1.ServiceAccount
	httpRoutes   map[string]*gatewayv1.HTTPRoute
	grpcRoutes   map[string]*gatewayv1.GRPCRoute
}

// decodeAll splits helm's output into documents and decodes each strictly.
func decodeAll(t *testing.T, manifest string) *rendered {
	t.Helper()
	r := &rendered{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		ingresses: map[string]*networkingv1.Ingress{}, serviceAccts: map[string]*corev1.ServiceAccount{},
		httpRoutes: map[string]*gatewayv1.HTTPRoute{}, grpcRoutes: map[string]*gatewayv1.GRPCRoute{},
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("splitting the manifest: %v", err)
		}
		if j, err := yaml.YAMLToJSON(doc); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		} else if string(bytes.TrimSpace(j)) == "null" {
			continue // comments only
		}
		obj, err := decodeStrict(doc)
		if err != nil {
			t.Fatalf("does not decode strictly into a Kubernetes API type: %v\n%s", err, doc)
		}
		r.all = append(r.all, obj)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployments[o.Name] = o
		case *corev1.Service:
			r.services[o.Name] = o
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.Secret:
			r.secrets[o.Name] = o
		case *autoscalingv2.HorizontalPodAutoscaler:
			r.hpas[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			r.pdbs[o.Name] = o
		case *networkingv1.Ingress:
			r.ingresses[o.Name] = o
		case *corev1.ServiceAccount:
			r.serviceAccts[o.Name] = o
		case *gatewayv1.HTTPRoute:
			r.httpRoutes[o.Name] = o
		case *gatewayv1.GRPCRoute:
			r.grpcRoutes[o.Name] = o
		default:
			t.Fatalf("rendered a %T the tests do not check", obj)
		}
	}
	if len(r.all) == 0 {
		t.Fatal("helm template rendered nothing")
	}
	return r
}
