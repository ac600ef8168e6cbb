package deploycheck

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// What an SRE needs from the production manifests, in every kustomization users apply.

func TestManifests_AccountKeySecretIsRequired(t *testing.T) {
	t.Parallel()
	for _, dir := range kustomizations {
		for name, d := range build(t, dir).deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Optional != nil && *r.SecretKeyRef.Optional {
						t.Errorf("%s: %s: %s comes from an optional Secret %s: without it cfp would silently use Entra ID", dir, name, e.Name, r.SecretKeyRef.Name)
					}
				}
			}
		}
	}
}

// pinnedRE is an image with a release tag (X.Y.Z, optionally -shell) or a digest.
var pinnedRE = regexp.MustCompile(`^ghcr\.io/cfp-dev/cfp(:\d+\.\d+\.\d+(-shell)?|@sha256:[0-9a-f]{64})$`)

func TestManifests_ImagesArePinned(t *testing.T) {
	t.Parallel()
	for _, dir := range kustomizations {
		versions := map[string]bool{}
		for name, d := range build(t, dir).deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				if !pinnedRE.MatchString(c.Image) {
					t.Errorf("%s: %s runs image %q, want ghcr.io/cfp-dev/cfp pinned to a release (X.Y.Z) or a digest", dir, name, c.Image)
					continue
				}
				_, tag, _ := strings.Cut(c.Image, ":")
				versions[strings.TrimSuffix(tag, "-shell")] = true
				_, usesExec := flagValue(c.Args, "exec")
				_, usesLines := flagValue(c.Args, "exec-lines")
				if (usesExec || usesLines) && strings.Contains(c.Image, ":") && !strings.HasSuffix(c.Image, "-shell") {
					t.Errorf("%s: %s runs a delegate with sh -c in %s, which has no shell; use the -shell variant", dir, name, c.Image)
				}
			}
		}
		if len(versions) > 1 {
			t.Errorf("%s: the Deployments run different releases %v", dir, slices.Sorted(mapKeys(versions)))
		}
	}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestManifests_ProcessHasAPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	for _, dir := range kustomizations {
		o := build(t, dir)
		d := o.deployments["cfp-process"]
		var found bool
		for name, p := range o.pdbs {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			if err != nil {
				t.Fatalf("%s: PodDisruptionBudget %s: %v", dir, name, err)
			}
			if sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			found = true
			// One pod (KEDA's minReplicaCount) must still be evictable, or node drains hang.
			if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || p.Spec.MinAvailable != nil {
				t.Errorf("%s: PodDisruptionBudget %s: want maxUnavailable: 1 (one host at a time, a single pod still evictable)", dir, name)
			}
		}
		if !found {
			t.Errorf("%s: no PodDisruptionBudget selects the cfp-process pods", dir)
		}
	}
}

func TestManifests_DelegateDoesNotLogEveryChange(t *testing.T) {
	t.Parallel()
	o := build(t, "base")
	pod := o.deployments["cfp-process"].Spec.Template.Spec
	c := pod.Containers[0]
	script, ok := flagValue(c.Args, "exec")
	if !ok {
		if _, lines := flagValue(c.Args, "exec-lines"); !lines {
			t.Fatalf("args %q: no --exec or --exec-lines: the default delegate writes every change to the pod log", c.Args)
		}
		return
	}
	// The script comes from a ConfigMap mounted in the pod.
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return path.Dir(script) == m.MountPath })
	if i < 0 {
		t.Fatalf("--exec=%s is not in a mounted volume", script)
	}
	v := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	if v < 0 || pod.Volumes[v].ConfigMap == nil {
		t.Fatalf("--exec=%s: volume %s is not a ConfigMap", script, c.VolumeMounts[i].Name)
	}
	cm := o.configMaps[pod.Volumes[v].ConfigMap.Name]
	if cm == nil {
		t.Fatalf("--exec=%s: no ConfigMap %s", script, pod.Volumes[v].ConfigMap.Name)
	}
	body, ok := cm.Data[path.Base(script)]
	if !ok {
		t.Fatalf("--exec=%s: ConfigMap %s has no key %s", script, cm.Name, path.Base(script))
	}
	if m := pod.Volumes[v].ConfigMap.DefaultMode; m == nil || *m&0o111 == 0 {
		t.Errorf("--exec=%s is not executable (defaultMode)", script)
	}
	if !strings.HasPrefix(body, "#!/bin/sh\n") {
		t.Errorf("%s does not start with #!/bin/sh", script)
	}
	// The delegate buffers in /tmp, and the root filesystem is read-only.
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" && !m.ReadOnly }) {
		t.Error("no writable /tmp for the delegate (the root filesystem is read-only)")
	}
}

// TestManifests_NamesInOnePlace renames the processor, database, container, lease container and
// endpoint in cfp-config only, and expects both overlays' ScaledObjects to follow.
func TestManifests_NamesInOnePlace(t *testing.T) {
	t.Parallel()
	mem := filesys.MakeFsInMemory()
	const top = "/deploy"
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return mem.WriteFile(filepath.Join(top, rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(top, "base", "configmap.yaml")
	b, err := mem.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	renamed := map[string]string{
		"COSMOS_ENDPOINT": "https://other.documents.azure.com:443/", "COSMOS_DATABASE": "otherdb",
		"COSMOS_CONTAINER": "othercontainer", "CFP_LEASE_CONTAINER": "otherleases", "CFP_PROCESSOR": "otherproc",
	}
	cfg := string(b)
	for k, v := range renamed {
		re := regexp.MustCompile(`(?m)^(  ` + k + `: ).*$`)
		if !re.MatchString(cfg) {
			t.Fatalf("cfp-config has no %s", k)
		}
		cfg = re.ReplaceAllString(cfg, `${1}"`+v+`"`)
	}
	if err := mem.WriteFile(cfgPath, []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"keda-prometheus", "keda-azure-cosmosdb"} {
		o := buildFS(t, mem, top, dir)
		for _, so := range o.scaled {
			for _, tr := range so.Spec.Triggers {
				switch tr.Type {
				case "prometheus":
					want := `processor="otherproc", database="otherdb", container="othercontainer"`
					if !strings.Contains(tr.Metadata["query"], want) {
						t.Errorf("%s: with cfp-config renamed, the query is %q, want it to select %s", dir, tr.Metadata["query"], want)
					}
				case "azure-cosmosdb":
					for k, env := range map[string]string{"processorName": "CFP_PROCESSOR", "databaseId": "COSMOS_DATABASE", "leaseDatabaseId": "COSMOS_DATABASE",
						"containerId": "COSMOS_CONTAINER", "leaseContainerId": "CFP_LEASE_CONTAINER", "endpoint": "COSMOS_ENDPOINT"} {
						if tr.Metadata[k] != renamed[env] {
							t.Errorf("%s: with cfp-config renamed, %s is %q, want %q (cfp-config %s)", dir, k, tr.Metadata[k], renamed[env], env)
						}
					}
				}
			}
		}
	}
}

// statPanel is the part of a Grafana stat panel these tests read.
type statPanel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	FieldConfig struct {
		Defaults struct {
			Thresholds *struct {
				Mode  string `json:"mode"`
				Steps []struct {
					Color string   `json:"color"`
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// colorAt is the color Grafana gives value v: the last step whose value is at most v.
func (p statPanel) colorAt(v float64) string {
	color := ""
	for _, s := range p.FieldConfig.Defaults.Thresholds.Steps {
		if s.Value == nil || *s.Value <= v {
			color = s.Color
		}
	}
	return color
}

func TestDashboard_StatPanelsHaveThresholds(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, "base", "grafana", "cfp-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []statPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	stuck := false
	for _, p := range d.Panels {
		if p.Type != "stat" {
			continue
		}
		th := p.FieldConfig.Defaults.Thresholds
		if th == nil || th.Mode != "absolute" || len(th.Steps) < 2 {
			t.Errorf("stat panel %q has no absolute thresholds: it shows no color for trouble", p.Title)
			continue
		}
		if th.Steps[0].Value != nil {
			t.Errorf("stat panel %q: the first step has a value; Grafana's base step has none", p.Title)
		}
		if p.colorAt(0) == "red" {
			t.Errorf("stat panel %q is red at 0", p.Title)
		}
		if len(p.Targets) == 1 && strings.Contains(p.Targets[0].Expr, `state="stuck"`) {
			stuck = true
			if c := p.colorAt(1); c != "red" {
				t.Errorf("stat panel %q is %q at 1 stuck lease, want red", p.Title, c)
			}
		}
	}
	if !stuck {
		t.Error("no stat panel counts stuck leases")
	}
}
