package deploycheck

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const root = "../../deploy/kubernetes"

// kustomizations are the directories users apply (the base is included by both).
var kustomizations = []string{"base", "keda-prometheus", "keda-azure-cosmosdb"}

// objects are the decoded resources of one kustomization.
type objects struct {
	deployments map[string]*appsv1.Deployment
	configMaps  map[string]*corev1.ConfigMap
	scaled      []*ScaledObject
	triggerAuth map[string]*TriggerAuthentication
	pdbs        map[string]*policyv1.PodDisruptionBudget
}

// build runs kustomize on dir (on disk, no network) and decodes every resource strictly into
// its API type.
func build(t *testing.T, dir string) objects {
	t.Helper()
	return buildFS(t, filesys.MakeFsOnDisk(), root, dir)
}

// buildFS is build on the manifests under top in fsys.
func buildFS(t *testing.T, fsys filesys.FileSystem, top, dir string) objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(fsys, filepath.Join(top, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	o := objects{deployments: map[string]*appsv1.Deployment{}, configMaps: map[string]*corev1.ConfigMap{}, triggerAuth: map[string]*TriggerAuthentication{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind := r.GetApiVersion() + "/" + r.GetKind()
		var into any
		switch kind {
		case "apps/v1/Deployment":
			d := &appsv1.Deployment{}
			o.deployments[r.GetName()], into = d, d
		case "v1/ConfigMap":
			c := &corev1.ConfigMap{}
			o.configMaps[r.GetName()], into = c, c
		case "policy/v1/PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			o.pdbs[r.GetName()], into = p, p
		case "v1/Service":
			into = &corev1.Service{}
		case "v1/ServiceAccount":
			into = &corev1.ServiceAccount{}
		case "keda.sh/v1alpha1/ScaledObject":
			s := &ScaledObject{}
			o.scaled, into = append(o.scaled, s), s
		case "keda.sh/v1alpha1/TriggerAuthentication":
			a := &TriggerAuthentication{}
			o.triggerAuth[r.GetName()], into = a, a
		default:
			t.Errorf("%s: %s %s has no API type to check it against", dir, kind, r.GetName())
			continue
		}
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Errorf("%s: %s %s: %v", dir, kind, r.GetName(), err)
		}
	}
	return o
}

func TestManifests_DecodeStrictly(t *testing.T) {
	t.Parallel()
	for _, dir := range kustomizations {
		o := build(t, dir)
		for _, name := range []string{"cfp-process", "cfp-estimate"} {
			if o.deployments[name] == nil {
				t.Errorf("%s: no Deployment %s", dir, name)
			}
		}
		if dir != "base" && len(o.scaled) != 1 {
			t.Errorf("%s: %d ScaledObjects, want 1", dir, len(o.scaled))
		}
	}
}

// flagValue returns the value of --name=V in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestManifests_ProcessDeployment(t *testing.T) {
	t.Parallel()
	d := build(t, "base").deployments["cfp-process"]
	if d == nil {
		t.Fatal("no cfp-process")
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "process" {
		t.Fatalf("args %q: want cfp process", c.Args)
	}
	for name, want := range map[string]string{"log-format": "json", "events": "jsonl", "instance": "$(POD_NAME)"} {
		if v, _ := flagValue(c.Args, name); v != want {
			t.Errorf("--%s=%q, want %q", name, v, want)
		}
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAME" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME does not come from the pod name (downward API)")
	}
	// cfp releases its leases within --shutdown-timeout (batches in flight) plus the release
	// timeout (10s); the grace period must leave it that long.
	shutdown := 30 * time.Second
	if v, ok := flagValue(c.Args, "shutdown-timeout"); ok {
		var err error
		if shutdown, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	const release = 10 * time.Second
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown+release {
		t.Errorf("terminationGracePeriodSeconds %v, want above %s", g, shutdown+release)
	}
	checkProbes(t, "cfp-process", c)
	checkNonRoot(t, "cfp-process", pod, c)
	keyFromSecret := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "COSMOS_KEY" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
	})
	if !keyFromSecret {
		t.Error("COSMOS_KEY does not come from a Secret")
	}
	if d.Spec.Template.Labels["azure.workload.identity/use"] != "true" {
		t.Error("the pods do not opt in to Entra workload identity")
	}
}

func TestManifests_EstimateDeployment(t *testing.T) {
	t.Parallel()
	d := build(t, "base").deployments["cfp-estimate"]
	c := d.Spec.Template.Spec.Containers[0]
	if c.Args[0] != "estimate" {
		t.Fatalf("args %q: want cfp estimate", c.Args)
	}
	if v, ok := flagValue(c.Args, "metrics-addr"); !ok || !strings.HasSuffix(v, ":9464") {
		t.Errorf("--metrics-addr=%q, want :9464", v)
	}
	checkProbes(t, "cfp-estimate", c)
	checkNonRoot(t, "cfp-estimate", d.Spec.Template.Spec, c)
}

func checkProbes(t *testing.T, name string, c corev1.Container) {
	t.Helper()
	addr, _ := flagValue(c.Args, "metrics-addr")
	_, port, _ := strings.Cut(addr, ":")
	for probe, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		want := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[probe]
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want {
			t.Errorf("%s: %s probe is not GET %s", name, probe, want)
			continue
		}
		pp := p.HTTPGet.Port.String()
		if i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == pp }); i >= 0 {
			pp = strconv.Itoa(int(c.Ports[i].ContainerPort))
		}
		if pp != port {
			t.Errorf("%s: %s probe on port %s, cfp serves --metrics-addr=%s", name, probe, pp, addr)
		}
	}
}

func checkNonRoot(t *testing.T, name string, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("%s: the pod does not run as a non-root user", name)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("%s: the root filesystem is writable", name)
	}
}

// promLabels returns the label names a PromQL query filters or groups on.
func promLabels(q string) []string {
	var out []string
	for _, sel := range regexp.MustCompile(`\{([^}]*)\}`).FindAllStringSubmatch(q, -1) {
		for _, m := range regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`).FindAllStringSubmatch(sel[1], -1) {
			out = append(out, m[1])
		}
	}
	for _, g := range regexp.MustCompile(`(?:by|without)\s*\(([^)]*)\)`).FindAllStringSubmatch(q, -1) {
		for _, l := range strings.Split(g[1], ",") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

func TestManifests_KEDA(t *testing.T) {
	t.Parallel()
	known := map[string][]string{
		// The metadata keys of KEDA's scalers (pkg/scalers/prometheus_scaler.go,
		// azure_cosmosdb_scaler.go); an unknown key is a typo KEDA ignores.
		"prometheus": {"serverAddress", "query", "threshold", "activationThreshold", "ignoreNullValues",
			"namespace", "customHeaders", "queryParameters", "unsafeSsl", "authModes", "timeout"},
		"azure-cosmosdb": {"databaseId", "containerId", "leaseDatabaseId", "leaseContainerId", "processorName",
			"endpoint", "connection", "leaseEndpoint", "leaseConnection", "changeFeedLagThreshold",
			"activationChangeFeedLagThreshold", "maxActiveLeasesPerReplica", "enableHighAvailability",
			"cosmosDBResourceURL", "cloud", "activeDirectoryEndpoint"},
	}
	for _, dir := range []string{"keda-prometheus", "keda-azure-cosmosdb"} {
		o := build(t, dir)
		cfg := o.configMaps["cfp-config"].Data
		for _, so := range o.scaled {
			what := fmt.Sprintf("%s: ScaledObject %s", dir, so.Name)
			if ref := so.Spec.ScaleTargetRef; ref == nil || o.deployments[ref.Name] == nil || ref.Name != "cfp-process" {
				t.Errorf("%s does not scale the cfp-process Deployment", what)
			}
			leases, err := strconv.Atoi(so.Annotations["cfp.dev/leases"])
			if err != nil {
				t.Errorf("%s: annotation cfp.dev/leases: %v", what, err)
			}
			if m := so.Spec.MaxReplicaCount; m == nil || int(*m) != leases {
				t.Errorf("%s: maxReplicaCount %s, want the number of leases (%d): a pod beyond it holds no lease", what, fmtInt(m), leases)
			}
			for _, tr := range so.Spec.Triggers {
				for k := range tr.Metadata {
					if !slices.Contains(known[tr.Type], k) {
						t.Errorf("%s: %s trigger has unknown metadata %q", what, tr.Type, k)
					}
				}
				switch tr.Type {
				case "prometheus":
					q := tr.Metadata["query"]
					if !strings.Contains(q, "cfp_estimate_lease_lag") {
						t.Errorf("%s: query %q does not read cfp's lag", what, q)
					}
					got := promLabels(q)
					for _, l := range got {
						if l != "processor" && l != "database" && l != "container" {
							t.Errorf("%s: query %q uses label %q; only processor, database and container identify a processor", what, q, l)
						}
					}
					for l, env := range map[string]string{"processor": "CFP_PROCESSOR", "database": "COSMOS_DATABASE", "container": "COSMOS_CONTAINER"} {
						if !strings.Contains(q, fmt.Sprintf("%s=%q", l, cfg[env])) {
							t.Errorf("%s: query %q does not select %s=%q (cfp-config %s)", what, q, l, cfg[env], env)
						}
					}
				case "azure-cosmosdb":
					for k, env := range map[string]string{"processorName": "CFP_PROCESSOR", "databaseId": "COSMOS_DATABASE",
						"containerId": "COSMOS_CONTAINER", "leaseContainerId": "CFP_LEASE_CONTAINER", "endpoint": "COSMOS_ENDPOINT"} {
						if tr.Metadata[k] != cfg[env] {
							t.Errorf("%s: %s %q is not cfp-config's %s %q", what, k, tr.Metadata[k], env, cfg[env])
						}
					}
					if tr.AuthenticationRef == nil || o.triggerAuth[tr.AuthenticationRef.Name] == nil {
						t.Errorf("%s: no TriggerAuthentication for the azure-cosmosdb trigger", what)
					}
				default:
					t.Errorf("%s: unexpected trigger %s", what, tr.Type)
				}
			}
		}
	}
}

func TestPromLabels(t *testing.T) {
	t.Parallel()
	got := promLabels(`sum by (lease) (cfp_estimate_lease_lag{processor="p", database!="d", container=~"c.*"})`)
	if want := []string{"processor", "database", "container", "lease"}; !slices.Equal(got, want) {
		t.Errorf("promLabels = %v, want %v", got, want)
	}
}

func fmtInt(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}
