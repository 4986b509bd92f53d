// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/podpolicy"
)

const (
	manifestDir = "kubernetes"
	chartDir    = "helm/sluice"
	namespace   = "sluice-system"
)

// kustomization is the part of kustomize's Kustomization these manifests
// use: decoding into it strictly refuses a misspelt or unexpected key.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
}

// object is one decoded document: its kind and the typed value.
type object struct {
	source string // file (and document index) it came from
	kind   string
	name   string
	ns     string
	value  any
}

// newTyped returns a pointer to the API type for apiVersion and kind, or
// an error for a kind these tests do not know (so a new kind cannot slip
// in undecoded).
func newTyped(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		return &corev1.Namespace{}, nil
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}, nil
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}, nil
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}, nil
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		return &kustomization{}, nil
	}
	return nil, fmt.Errorf("unknown kind %q of apiVersion %q", kind, apiVersion)
}

// decodeStrict decodes every YAML document of data into its API type,
// refusing unknown and duplicate fields. Documents holding only comments
// are skipped.
func decodeStrict(source string, data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		src := fmt.Sprintf("%s#%d", source, i)
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		if t := bytes.TrimSpace(j); bytes.Equal(t, []byte("null")) || len(t) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(j, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		v, err := newTyped(meta.APIVersion, meta.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		// As the API server decodes: field names match case-sensitively
		// (encoding/json alone would take hostPid for hostPID), and an
		// unknown or duplicate field is an error.
		strict, err := sigsjson.UnmarshalStrict(j, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", src, meta.Kind, err)
		}
		if len(strict) > 0 {
			return nil, fmt.Errorf("%s: %s: %w", src, meta.Kind, errors.Join(strict...))
		}
		objs = append(objs, object{source: src, kind: meta.Kind, name: meta.Metadata.Name, ns: meta.Metadata.Namespace, value: v})
	}
}

// manifests decodes every deploy/kubernetes/*.yaml.
func manifests(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	var objs []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeStrict(f, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(o) == 0 {
			t.Errorf("%s: no document", f)
		}
		objs = append(objs, o...)
	}
	return objs
}

// find returns the one object of kind and name, failing the test when
// there is none or more than one.
func find[T any](t *testing.T, objs []object, kind, name string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			found = append(found, o.value.(T))
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects %s %s, want 1", len(found), kind, name)
	}
	return found[0]
}

func TestManifestsDecodeStrictly(t *testing.T) {
	objs := manifests(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.kind]++
		if o.kind == "Kustomization" || o.kind == "Namespace" {
			continue
		}
		if o.ns != namespace {
			t.Errorf("%s: %s %s is in namespace %q, want %q", o.source, o.kind, o.name, o.ns, namespace)
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "Kustomization"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
	sa := find[*corev1.ServiceAccount](t, objs, "ServiceAccount", "sluice")
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Error("the service account mounts its token: the agent reads nothing from the API server")
	}
	ds := find[*appsv1.DaemonSet](t, objs, "DaemonSet", "sluice")
	checkPodSpec(t, "daemonset.yaml", ds)
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Operator == corev1.TolerationOpExists && tol.Key == "" && tol.Effect == ""
	}) {
		t.Error("daemonset.yaml: no toleration of every taint")
	}
}

// TestKustomizationListsEveryManifest: kubectl apply -k applies what the
// kustomization lists, so a manifest it does not list is never applied.
func TestKustomizationListsEveryManifest(t *testing.T) {
	k := find[*kustomization](t, manifests(t), "Kustomization", "")
	files, _ := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	got := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml lists %q, the directory has %q", got, want)
	}
	if k.Namespace != namespace {
		t.Errorf("kustomization namespace %q, want %q", k.Namespace, namespace)
	}
}

// TestStrictDecoderRefuses: the decoder the other tests rely on refuses
// what the API server would not take, or would silently drop.
func TestStrictDecoderRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field": `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: x}
spec:
  template:
    spec:
      hostPid: true
      containers: [{name: x, image: x}]
`,
		"misspelt nested field": `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: x}
spec:
  template:
    spec:
      containers:
        - name: x
          image: x
          securityContext: {capabilites: {add: [BPF]}}
`,
		"duplicate field": `apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data: {a: "1"}
data: {b: "2"}
`,
		"unknown kind": `apiVersion: v1
kind: Secret
metadata: {name: x}
`,
		"kustomization key": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resource: [a.yaml]
`,
	} {
		if _, err := decodeStrict(name, []byte(doc)); err == nil {
			t.Errorf("%s: decoded, want an error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// checkPodSpec holds a DaemonSet to what the agent needs and to the API
// server's rules that strict decoding does not see.
func checkPodSpec(t *testing.T, src string, ds *appsv1.DaemonSet) {
	t.Helper()
	ps := ds.Spec.Template.Spec
	if !ps.HostPID || !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("%s: hostPID %v, hostNetwork %v, dnsPolicy %q: want host PID and network with ClusterFirstWithHostNet", src, ps.HostPID, ps.HostNetwork, ps.DNSPolicy)
	}
	if ps.PriorityClassName != "system-node-critical" {
		t.Errorf("%s: priorityClassName %q", src, ps.PriorityClassName)
	}
	if sel := ds.Spec.Selector; sel == nil || len(sel.MatchLabels) == 0 {
		t.Errorf("%s: no selector", src)
	} else {
		for k, v := range sel.MatchLabels {
			if ds.Spec.Template.Labels[k] != v {
				t.Errorf("%s: selector %s=%s does not select the pod template", src, k, v)
			}
		}
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", src, len(ps.Containers))
	}
	c := ps.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil {
		t.Fatalf("%s: want privileged: false and named capabilities", src)
	}
	hostPaths := map[string]string{}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	for _, m := range c.VolumeMounts {
		// The API server: "Bidirectional mount propagation is available
		// only to privileged containers".
		if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
			t.Errorf("%s: mount %s is Bidirectional in a container that is not privileged: the API server refuses it", src, m.Name)
		}
		// The agent passes host paths to the runtime (the hook binary,
		// the guard's copy): inside the pod they must be the same paths.
		if hp, ok := hostPaths[m.Name]; ok && hp != m.MountPath {
			t.Errorf("%s: host path %s is mounted at %s: the agent and the runtime's hook would disagree on paths", src, hp, m.MountPath)
		}
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation && slices.Contains(sc.Capabilities.Add, "SYS_ADMIN") {
		t.Errorf("%s: allowPrivilegeEscalation false with SYS_ADMIN: the API server refuses it", src)
	}
}

// command returns the DaemonSet's container command.
func command(ds *appsv1.DaemonSet) []string { return ds.Spec.Template.Spec.Containers[0].Command }

// flagValue is the value after --name in cmd, and whether it is there.
func flagValue(cmd []string, name string) (string, bool) {
	for i, a := range cmd {
		if a == "--"+name && i+1 < len(cmd) {
			return cmd[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// configMapFiles is a ConfigMap's data as the mounted files' bytes.
func configMapFiles(cm *corev1.ConfigMap) map[string][]byte {
	files := map[string][]byte{}
	for k, v := range cm.Data {
		files[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		files[k] = v
	}
	return files
}

// checkPolicies parses the policies ConfigMap with sluice's own parser
// and the node allowlist with the allowlist parser, as the agent will.
func checkPolicies(t *testing.T, policies, nodeAllowlist *corev1.ConfigMap) *podpolicy.Set {
	t.Helper()
	set, err := podpolicy.Parse(configMapFiles(policies))
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", policies.Name, err)
	}
	if len(nodeAllowlist.Data) != 1 {
		t.Errorf("ConfigMap %s: keys %v, want network_allowlist.json alone", nodeAllowlist.Name, nodeAllowlist.Data)
	}
	if _, err := allowlist.Parse([]byte(nodeAllowlist.Data["network_allowlist.json"])); err != nil {
		t.Errorf("ConfigMap %s: network_allowlist.json: %v", nodeAllowlist.Name, err)
	}
	return set
}

func TestExamplePoliciesParse(t *testing.T) {
	objs := manifests(t)
	set := checkPolicies(t,
		find[*corev1.ConfigMap](t, objs, "ConfigMap", "sluice-policies"),
		find[*corev1.ConfigMap](t, objs, "ConfigMap", "sluice-node-allowlist"))
	if got := set.Names(); !slices.Equal(got, []string{"agents", "loopback"}) {
		t.Errorf("policies %q, want agents and loopback", got)
	}
	for _, tc := range []struct {
		pod              podpolicy.Pod
		guarded, refused bool
		policy           string
	}{
		{pod: podpolicy.Pod{Namespace: "agents", Name: "a"}, guarded: true, policy: "agents"},
		{pod: podpolicy.Pod{Namespace: "agents", Name: "b", Annotations: map[string]string{podpolicy.Annotation: "loopback"}}, guarded: true, policy: "loopback"},
		{pod: podpolicy.Pod{Namespace: "ci-7", Name: "c"}, guarded: true, refused: true},
		{pod: podpolicy.Pod{Namespace: "ci-7", Name: "d", Annotations: map[string]string{podpolicy.Annotation: "agents"}}, guarded: true, policy: "agents"},
		{pod: podpolicy.Pod{Namespace: "default", Name: "e"}},
	} {
		c := set.Choose(tc.pod)
		if c.Guarded != tc.guarded || (c.Refused != "") != tc.refused || c.Name != tc.policy {
			t.Errorf("%s: guarded %v, policy %q, refused %q; want guarded %v, policy %q, refused %v",
				tc.pod, c.Guarded, c.Name, c.Refused, tc.guarded, tc.policy, tc.refused)
		}
	}
	// The agent's own namespace must never be guarded: the hook would
	// have to exempt it, and a guard naming it could refuse the agent.
	if set.Guard.Guards(namespace) || set.Guard.Guards("kube-system") {
		t.Errorf("the example guard names %s or kube-system", namespace)
	}
}

var (
	helpOnce sync.Once
	helpDir  string
	helpErr  error
)

// sluiceBinary builds cmd/sluice from the product module (the parent
// directory) once per test run.
func sluiceBinary(t *testing.T) string {
	t.Helper()
	helpOnce.Do(func() {
		helpDir, helpErr = os.MkdirTemp("", "sluice-deploy-test")
		if helpErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(helpDir, "sluice"), "./cmd/sluice")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			helpErr = fmt.Errorf("go build ./cmd/sluice: %v\n%s", err, out)
		}
	})
	if helpErr != nil {
		t.Fatal(helpErr)
	}
	return filepath.Join(helpDir, "sluice")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if helpDir != "" {
		os.RemoveAll(helpDir)
	}
	os.Exit(code)
}

// flagRE matches a flag's line in cobra's help: "  -h, --help" or
// "      --state-dir string".
var flagRE = regexp.MustCompile(`(?m)^\s+(?:-[A-Za-z0-9], )?--([a-z0-9][a-z0-9-]*)`)

// knownFlags runs `sluice ARGS... --help` and returns the flags it lists.
func knownFlags(t *testing.T, args ...string) map[string]bool {
	t.Helper()
	out, err := exec.Command(sluiceBinary(t), append(args, "--help")...).Output()
	if err != nil {
		t.Fatalf("sluice %s --help: %v", strings.Join(args, " "), err)
	}
	flags := map[string]bool{}
	for _, m := range flagRE.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["help"] || len(flags) < 2 {
		t.Fatalf("sluice %s --help: no flags found in:\n%s", strings.Join(args, " "), out)
	}
	return flags
}

// checkFlags fails on every --flag of cmd (after the subcommand words)
// that known lacks, and on anything that is neither a flag nor a value.
func checkFlags(t *testing.T, src string, cmd []string, words int, known map[string]bool) {
	t.Helper()
	for i := words; i < len(cmd); i++ {
		name, ok := strings.CutPrefix(cmd[i], "--")
		if !ok {
			t.Errorf("%s: argument %q is not a flag", src, cmd[i])
			continue
		}
		name, _, inline := strings.Cut(name, "=")
		if !known[name] {
			t.Errorf("%s: `%s` has no flag --%s", src, strings.Join(cmd[:words], " "), name)
		}
		if !inline {
			i++ // its value
		}
	}
}

// TestCommandFlagsExist: the DaemonSet's command and the runtime hook's
// args use only flags the binary has (every one of these flags takes a
// value).
func TestCommandFlagsExist(t *testing.T) {
	node := knownFlags(t, "node")
	ds := find[*appsv1.DaemonSet](t, manifests(t), "DaemonSet", "sluice")
	cmd := command(ds)
	if len(cmd) < 2 || cmd[0] != "sluice" || cmd[1] != "node" {
		t.Fatalf("daemonset.yaml runs %q, want sluice node", cmd)
	}
	checkFlags(t, "daemonset.yaml", cmd, 2, node)

	hook := knownFlags(t, "node", "hook")
	b, err := os.ReadFile(filepath.Join(manifestDir, "base-spec-hook.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Hooks struct {
			CreateRuntime []struct {
				Path    string   `json:"path"`
				Args    []string `json:"args"`
				Timeout int      `json:"timeout"`
			} `json:"createRuntime"`
		} `json:"hooks"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		t.Fatalf("base-spec-hook.json: %v", err)
	}
	if len(spec.Hooks.CreateRuntime) != 1 {
		t.Fatalf("base-spec-hook.json: %d createRuntime hooks, want 1", len(spec.Hooks.CreateRuntime))
	}
	h := spec.Hooks.CreateRuntime[0]
	if len(h.Args) < 3 || !slices.Equal(h.Args[:3], []string{"sluice", "node", "hook"}) {
		t.Fatalf("base-spec-hook.json runs %q, want sluice node hook", h.Args)
	}
	checkFlags(t, "base-spec-hook.json", h.Args, 3, hook)
	if h.Timeout <= 0 {
		t.Error("base-spec-hook.json: the hook has no timeout")
	}

	// The hook is the binary the agent installs, and reads the guard copy
	// the agent writes.
	hookDir, _ := flagValue(cmd, "hook-dir")
	if want := path.Join(hookDir, "sluice"); h.Path != want {
		t.Errorf("base-spec-hook.json runs %s, the agent installs itself at %s", h.Path, want)
	}
	if a, b := mustFlag(t, cmd, "guard-file"), mustFlag(t, h.Args, "guard-file"); a != b {
		t.Errorf("the agent's --guard-file is %s, the hook's %s", a, b)
	}

	// containerd's NRI socket is the one the agent connects to.
	toml, err := os.ReadFile(filepath.Join(manifestDir, "containerd-nri.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*socket_path\s*=\s*"([^"]+)"`).FindSubmatch(toml)
	if m == nil {
		t.Fatal("containerd-nri.toml: no socket_path")
	}
	if sock := mustFlag(t, cmd, "nri-socket"); string(m[1]) != sock {
		t.Errorf("containerd-nri.toml puts the NRI socket at %s, the agent connects to %s", m[1], sock)
	}
}

// mustFlag is flagValue, failing the test when the flag is missing.
func mustFlag(t *testing.T, cmd []string, name string) string {
	t.Helper()
	v, ok := flagValue(cmd, name)
	if !ok {
		t.Fatalf("%q has no --%s", cmd, name)
	}
	return v
}

// render renders the chart as `helm install --dry-run` would, with vals
// over the chart's values, and decodes every manifest strictly.
func render(t *testing.T, ch *chart.Chart, release, ns string, vals map[string]any) []object {
	t.Helper()
	rv, err := chartutil.ToRenderValues(ch, vals, common.ReleaseOptions{Name: release, Namespace: ns, IsInstall: true, Revision: 1}, common.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	var objs []object
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if !strings.HasSuffix(name, ".yaml") {
			if !strings.HasSuffix(name, "NOTES.txt") && !strings.HasSuffix(name, ".tpl") {
				t.Errorf("chart renders %s, neither a manifest nor NOTES.txt", name)
			}
			continue
		}
		o, err := decodeStrict(name, []byte(out[name]))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range o {
			if x.kind == "Namespace" || x.ns != ns {
				t.Errorf("%s: %s %s in namespace %q, want the release's %q", x.source, x.kind, x.name, x.ns, ns)
			}
		}
		objs = append(objs, o...)
	}
	return objs
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestChartLints(t *testing.T) {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	res := l.Run([]string{chartDir}, nil)
	for _, m := range res.Messages {
		t.Log(m)
	}
	if len(res.Errors) > 0 || res.TotalChartsLinted != 1 {
		t.Errorf("helm lint --strict: %d charts linted, errors: %v", res.TotalChartsLinted, res.Errors)
	}
}

// TestChartMatchesManifests: with its default values and the release
// named sluice in sluice-system, the chart renders the plain manifests'
// pod spec and policies exactly, so the two cannot drift.
func TestChartMatchesManifests(t *testing.T) {
	plain := manifests(t)
	rendered := render(t, loadChart(t), "sluice", namespace, nil)

	want := find[*appsv1.DaemonSet](t, plain, "DaemonSet", "sluice")
	got := find[*appsv1.DaemonSet](t, rendered, "DaemonSet", "sluice")
	checkPodSpec(t, "chart", got)
	w, g := want.Spec.Template.Spec, got.Spec.Template.Spec
	c, d := w.Containers[0], g.Containers[0]
	differ := false
	for _, f := range []struct {
		field     string
		want, got any
	}{
		{"hostPID", w.HostPID, g.HostPID},
		{"hostNetwork", w.HostNetwork, g.HostNetwork},
		{"dnsPolicy", w.DNSPolicy, g.DNSPolicy},
		{"priorityClassName", w.PriorityClassName, g.PriorityClassName},
		{"tolerations", w.Tolerations, g.Tolerations},
		{"serviceAccountName", w.ServiceAccountName, g.ServiceAccountName},
		{"automountServiceAccountToken", w.AutomountServiceAccountToken, g.AutomountServiceAccountToken},
		{"command", c.Command, d.Command},
		{"image", c.Image, d.Image},
		{"securityContext", c.SecurityContext, d.SecurityContext},
		{"resources", c.Resources, d.Resources},
		{"volumeMounts", c.VolumeMounts, d.VolumeMounts},
		{"volumes", w.Volumes, g.Volumes},
	} {
		if !equality.Semantic.DeepEqual(f.want, f.got) {
			differ = true
			t.Errorf("chart and daemonset.yaml differ in %s:\nchart: %+v\nplain: %+v", f.field, f.got, f.want)
		}
	}
	// And in everything else of the pod spec.
	if !differ && !equality.Semantic.DeepEqual(w, g) {
		t.Errorf("chart and daemonset.yaml pod specs differ:\nchart: %+v\nplain: %+v", g, w)
	}

	for _, name := range []string{"sluice-policies", "sluice-node-allowlist"} {
		pw := find[*corev1.ConfigMap](t, plain, "ConfigMap", name)
		pg := find[*corev1.ConfigMap](t, rendered, "ConfigMap", name)
		if !sameJSONData(t, pw.Data, pg.Data) {
			t.Errorf("ConfigMap %s: chart %v, configmap-example.yaml %v", name, pg.Data, pw.Data)
		}
	}
	checkPolicies(t, find[*corev1.ConfigMap](t, rendered, "ConfigMap", "sluice-policies"),
		find[*corev1.ConfigMap](t, rendered, "ConfigMap", "sluice-node-allowlist"))
	find[*corev1.ServiceAccount](t, rendered, "ServiceAccount", "sluice")
}

// sameJSONData compares two ConfigMaps' data key by key as JSON values.
func sameJSONData(t *testing.T, a, b map[string]string) bool {
	t.Helper()
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok {
			return false
		}
		var x, y any
		if err := json.Unmarshal([]byte(av), &x); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if err := json.Unmarshal([]byte(bv), &y); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if !equality.Semantic.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// TestChartValues renders the chart with every value overridden and
// checks each reaches the objects (and still parses and decodes).
func TestChartValues(t *testing.T) {
	vals := map[string]any{
		"image":       map[string]any{"repository": "registry.example/sluice", "tag": "v9.9.9", "pullPolicy": "Always"},
		"nriSocket":   "/run/containerd/nri/nri.sock",
		"hookDir":     "/usr/local/sluice",
		"stateDir":    "/run/sluice-alt",
		"guardDir":    "/var/lib/sluice-alt",
		"metricsAddr": "",
		"resources":   map[string]any{"requests": map[string]any{"cpu": "10m"}},
		"tolerations": []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"}},
		"nodeSelector": map[string]any{
			"sluice.dev/node": "true",
		},
		// Helm merges maps with the defaults: null drops an example.
		"policies": map[string]any{
			"agents": nil, "loopback": nil,
			"strict": map[string]any{"allowed_hosts": []any{map[string]any{"host": "api.example.com", "ports": []any{443}}}},
		},
		"guard": map[string]any{"namespaces": map[string]any{"agents": nil, "ci-*": nil,
			"team-*": map[string]any{"default": "strict"}}},
		"nodeAllowlist": []any{"api.example.com", "203.0.113.0/24"},
	}
	ch := loadChart(t)
	objs := render(t, ch, "edge", "agents-system", vals)
	ds := find[*appsv1.DaemonSet](t, objs, "DaemonSet", "edge-sluice")
	ps := ds.Spec.Template.Spec
	c := ps.Containers[0]
	if c.Image != "registry.example/sluice:v9.9.9" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
	}
	cmd := command(ds)
	for flag, want := range map[string]string{"nri-socket": "/run/containerd/nri/nri.sock", "hook-dir": "/usr/local/sluice", "state-dir": "/run/sluice-alt", "guard-file": "/var/lib/sluice-alt/namespaces.json"} {
		if got := mustFlag(t, cmd, flag); got != want {
			t.Errorf("--%s %s, want %s", flag, got, want)
		}
	}
	if _, ok := flagValue(cmd, "metrics-addr"); ok {
		t.Error("metricsAddr empty, but --metrics-addr is passed")
	}
	hostPaths := map[string]string{}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
		if v.ConfigMap != nil && !strings.HasPrefix(v.ConfigMap.Name, "edge-sluice-") {
			t.Errorf("volume %s mounts ConfigMap %s, not the release's", v.Name, v.ConfigMap.Name)
		}
	}
	for name, want := range map[string]string{"nri": "/run/containerd/nri", "hook-bin": "/usr/local/sluice", "state": "/run/sluice-alt", "guard": "/var/lib/sluice-alt"} {
		if hostPaths[name] != want {
			t.Errorf("volume %s: host path %q, want %q", name, hostPaths[name], want)
		}
	}
	if ps.NodeSelector["sluice.dev/node"] != "true" || len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != "dedicated" {
		t.Errorf("nodeSelector %v, tolerations %v", ps.NodeSelector, ps.Tolerations)
	}
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.String() != "10m" {
		t.Errorf("cpu request %s", q.String())
	}
	if ps.ServiceAccountName != "edge-sluice" {
		t.Errorf("service account %s", ps.ServiceAccountName)
	}
	find[*corev1.ServiceAccount](t, objs, "ServiceAccount", "edge-sluice")
	set := checkPolicies(t, find[*corev1.ConfigMap](t, objs, "ConfigMap", "edge-sluice-policies"),
		find[*corev1.ConfigMap](t, objs, "ConfigMap", "edge-sluice-node-allowlist"))
	if !slices.Equal(set.Names(), []string{"strict"}) || !set.Guard.Guards("team-a") || set.Guard.Guards("agents") {
		t.Errorf("policies %v, guard %+v", set.Names(), set.Guard)
	}
	checkPodSpec(t, "chart (values)", ds)

	// No guard: the ConfigMap has no namespaces.json, and nothing is
	// guarded.
	vals = map[string]any{"guard": nil}
	objs = render(t, ch, "sluice", namespace, vals)
	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap", "sluice-policies")
	if _, ok := cm.Data[podpolicy.GuardKey]; ok {
		t.Errorf("guard: null still renders %s", podpolicy.GuardKey)
	}
	if set := checkPolicies(t, cm, find[*corev1.ConfigMap](t, objs, "ConfigMap", "sluice-node-allowlist")); set.Guard != nil {
		t.Errorf("guard: null, yet a guard %+v", set.Guard)
	}
}

// TestChartRefusesGuardAsPolicy: a policy named like the guard's key
// fails the render rather than a ConfigMap the agent refuses.
func TestChartRefusesGuardAsPolicy(t *testing.T) {
	ch := loadChart(t)
	rv, err := chartutil.ToRenderValues(ch, map[string]any{"policies": map[string]any{"namespaces": map[string]any{"allowed_hosts": []any{}}}},
		common.ReleaseOptions{Name: "sluice", Namespace: namespace, IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Render(ch, rv); err == nil || !strings.Contains(err.Error(), "guard") {
		t.Errorf("a policy named namespaces rendered (err %v)", err)
	}
}

// TestEveryFileHasItsSPDXLine covers what the product module's own check
// (packaging) does not read: the chart's templates and text files.
func TestEveryFileHasItsSPDXLine(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(p) {
		case ".tpl", ".txt", ".toml", ".yaml", ".go":
			files = append(files, p)
		}
		if filepath.Base(p) == ".helmignore" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		var want string
		switch filepath.Ext(f) {
		case ".go":
			want = "// SPDX-License-Identifier: Apache-2.0"
		case ".tpl", ".txt":
			want = "{{/* SPDX-License-Identifier: Apache-2.0 */}}"
		default:
			want = "# SPDX-License-Identifier: Apache-2.0"
		}
		if first != want {
			t.Errorf("%s: line 1 is %q, want %q", f, first, want)
		}
	}
}
