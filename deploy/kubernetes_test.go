package deploy

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// manifests is what one kustomization renders, each object decoded into
// its API type.
type manifests struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	policy     *networkingv1.NetworkPolicy
	monitor    *monitoringv1.PodMonitor
	namespace  *corev1.Namespace
	cluster    *corev1.ConfigMap // listgate-cluster: the cluster, named once
}

// render runs a kustomization, as `kustomize build dir` does, and decodes
// each object it makes strictly: a field its type lacks (a typo, or one
// of another API version) fails the test, as does a kind not expected here.
func render(t *testing.T, dir string) manifests {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var m manifests
	for _, r := range resources.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		id := r.GetApiVersion() + " " + r.GetKind()
		var into any
		switch id {
		case "apps/v1 Deployment":
			into = decodeOnce(t, &m.deployment, id)
		case "v1 Service":
			into = decodeOnce(t, &m.service, id)
		case "policy/v1 PodDisruptionBudget":
			into = decodeOnce(t, &m.pdb, id)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			into = decodeOnce(t, &m.hpa, id)
		case "networking.k8s.io/v1 NetworkPolicy":
			into = decodeOnce(t, &m.policy, id)
		case "monitoring.coreos.com/v1 PodMonitor":
			into = decodeOnce(t, &m.monitor, id)
		case "v1 Namespace":
			into = decodeOnce(t, &m.namespace, id)
		case "v1 ConfigMap":
			into = decodeOnce(t, &m.cluster, id)
		default:
			t.Fatalf("%s renders a %s (%s), which this test does not know", dir, id, r.GetName())
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatalf("%s's %s %s does not decode strictly: %v\n%s", dir, id, r.GetName(), err, doc)
		}
	}
	if m.deployment == nil || m.service == nil || m.pdb == nil || m.hpa == nil || m.policy == nil || m.monitor == nil || m.cluster == nil {
		t.Fatalf("%s lacks a Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler, NetworkPolicy, PodMonitor or the cluster's ConfigMap", dir)
	}
	return m
}

// decodeOnce makes the object *p points to, failing on a second one.
func decodeOnce[T any](t *testing.T, p **T, id string) *T {
	t.Helper()
	if *p != nil {
		t.Fatalf("two objects of %s", id)
	}
	*p = new(T)
	return *p
}

// TestKustomizations renders each kustomization and checks it against the
// listgate command: its args are flags the command takes, its probes and
// scrapes ask for paths the listeners those ports belong to serve.
func TestKustomizations(t *testing.T) {
	bin := buildListgate(t)
	cli := readHelp(t, bin)
	live := startListgate(t, bin)
	for _, tc := range []struct {
		dir  string
		auth bool // credentials from a Secret
	}{
		{"kubernetes/base", false},
		{"kubernetes/overlays/prod", true},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			m := render(t, tc.dir)
			c := checkContainer(t, m.deployment, m.cluster, cli, bin)
			checkPorts(t, m, c, live)
			checkPod(t, m.deployment, c)
			checkNeighbours(t, m)
			if tc.auth {
				checkSecretAuth(t, m.deployment, c)
			}
		})
	}
}

// container is the listgate container of a Deployment and its flags.
type container struct {
	*corev1.Container
	flags map[string]string // flag name without "--" → value ("" for a bare bool)
}

func checkContainer(t *testing.T, d *appsv1.Deployment, cluster *corev1.ConfigMap, cli commandLine, bin string) container {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "listgate" {
		t.Fatalf("the Deployment's containers are %v, want one named listgate", cs)
	}
	c := container{Container: &cs[0], flags: map[string]string{}}
	if len(c.Command) > 0 {
		t.Errorf("the container sets command %q: the image's entrypoint is /listgate", c.Command)
	}
	for _, arg := range c.Args {
		name, value, _ := strings.Cut(arg, "=")
		name, ok := strings.CutPrefix(name, "--")
		switch {
		case !ok:
			t.Errorf("arg %q: write each flag as --name=value", arg)
		case !cli.flags[name]:
			t.Errorf("arg %q: listgate has no flag --%s (listgate --help)", arg, name)
		case c.flags[name] != "":
			t.Errorf("arg %q: --%s is given twice", arg, name)
		}
		c.flags[name] = value
	}
	// The command parses every flag and its value before --version exits.
	if out, err := runListgate(bin, append(slices.Clone(c.Args), "--version")...); err != nil {
		t.Errorf("listgate %s --version: %v\n%s", strings.Join(c.Args, " "), err, out)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "LISTGATE_") && !cli.env[e.Name] {
			t.Errorf("env %s is the variable of no flag (listgate --help)", e.Name)
		}
	}
	for name, value := range clusterFlags(t, c.Container, cluster) {
		if !cli.env[name] {
			t.Errorf("the ConfigMap %s's %s is the variable of no flag (listgate --help)", cluster.Name, name)
		}
		c.flags[flagOfVariable(name)] = value
	}
	if c.flags["mode"] != "prod" {
		t.Errorf("--mode is %q, want prod: dev mode gives every caller every scope", c.flags["mode"])
	}
	if !strings.Contains(c.Image, "/listgate:") {
		t.Errorf("the image is %q: the kustomization's images should name a registry and a tag", c.Image)
	}
	return c
}

// clusterFlags returns the variables a container takes from the cluster's
// ConfigMap (envFrom), checking that the cluster is named there alone: the
// container reads the ConfigMap by name, and no arg names the hosts,
// keyspace or data centre again.
func clusterFlags(t *testing.T, c *corev1.Container, cluster *corev1.ConfigMap) map[string]string {
	t.Helper()
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cluster.Name {
		t.Fatalf("container %s's envFrom is %+v, want the cluster's ConfigMap %s", c.Name, c.EnvFrom, cluster.Name)
	}
	for _, arg := range c.Args {
		for _, f := range []string{"cql-hosts", "cql-keyspace", "cql-local-dc", "cql-replication"} {
			if strings.HasPrefix(arg, "--"+f+"=") {
				t.Errorf("container %s's arg %q names the cluster again: it is in the ConfigMap %s alone", c.Name, arg, cluster.Name)
			}
		}
	}
	for _, f := range []string{"LISTGATE_CQL_HOSTS", "LISTGATE_CQL_KEYSPACE", "LISTGATE_CQL_LOCAL_DC"} {
		if cluster.Data[f] == "" {
			t.Errorf("the ConfigMap %s has no %s", cluster.Name, f)
		}
	}
	return cluster.Data
}

// flagOfVariable is the flag a LISTGATE_ variable sets.
func flagOfVariable(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "LISTGATE_")), "_", "-")
}

// The cluster is named in one file, and no kustomization picks an arg by
// its place in the list (a JSON patch's /args/3), which breaks silently
// when the args change.
func TestKubernetesNamesTheClusterOnce(t *testing.T) {
	var naming []string
	err := filepath.WalkDir("kubernetes", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "scylla-client.scylla.svc") {
			naming = append(naming, p)
		}
		if m := regexp.MustCompile(`/args/[0-9]+`).Find(b); m != nil {
			t.Errorf("%s patches %s: an arg by its place", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(naming) != 1 {
		t.Errorf("the cluster's hosts are named in %v, want one file", naming)
	}
	docs, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`/args/[0-9]+`).Find(docs); m != nil {
		t.Errorf("docs/deploy.md tells to patch %s: an arg by its place", m)
	}
}

// checkPorts maps each container port to the flag whose listener it is,
// and asks the running listgate for what the probes and the PodMonitor
// ask of those listeners.
func checkPorts(t *testing.T, m manifests, c container, live listeners) {
	t.Helper()
	byFlag := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		found := false
		for _, flag := range []string{"listen", "metrics-listen"} {
			host, port, ok := strings.Cut(c.flags[flag], ":")
			if ok && port == strconv.Itoa(int(p.ContainerPort)) {
				if host != "0.0.0.0" && host != "" {
					t.Errorf("--%s=%s: the kubelet and other pods reach the pod's IP, not %s", flag, c.flags[flag], host)
				}
				byFlag[flag], found = p, true
			}
		}
		if !found {
			t.Errorf("container port %s (%d) is no --listen or --metrics-listen", p.Name, p.ContainerPort)
		}
	}
	api, ok := byFlag["listen"]
	if !ok {
		t.Fatalf("no container port is --listen's (%s)", c.flags["listen"])
	}
	metrics, ok := byFlag["metrics-listen"]
	if !ok {
		t.Fatalf("no container port is --metrics-listen's (%s)", c.flags["metrics-listen"])
	}
	// flagOf says which listener a port (a name or a number) is.
	flagOf := func(what string, port intstr.IntOrString) string {
		for flag, p := range byFlag {
			if port.String() == p.Name || port.IntValue() == int(p.ContainerPort) {
				return flag
			}
		}
		t.Fatalf("%s names port %s, which the container lacks", what, port.String())
		return ""
	}
	for _, probe := range []struct {
		what  string
		p     *corev1.Probe
		paths []string
	}{
		{"livenessProbe", c.LivenessProbe, []string{"/healthz"}},
		{"readinessProbe", c.ReadinessProbe, []string{"/readyz"}},
	} {
		if probe.p == nil || probe.p.HTTPGet == nil {
			t.Errorf("no %s with httpGet", probe.what)
			continue
		}
		g := probe.p.HTTPGet
		if !slices.Contains(probe.paths, g.Path) {
			t.Errorf("%s asks for %s, want %v", probe.what, g.Path, probe.paths)
		}
		if code, _ := live.get(t, flagOf(probe.what, g.Port), g.Path); code != 200 {
			t.Errorf("%s: listgate answers %s on its %s listener with %d", probe.what, g.Path, flagOf(probe.what, g.Port), code)
		}
	}
	// The Service carries the API only: the metrics listener is for the
	// PodMonitor, and /metrics is not served on the API listener.
	if len(m.service.Spec.Ports) != 1 || flagOf("the Service", m.service.Spec.Ports[0].TargetPort) != "listen" {
		t.Errorf("the Service's ports are %v, want the one of --listen (%s)", m.service.Spec.Ports, api.Name)
	}
	if code, _ := live.get(t, "listen", "/metrics"); code != 404 {
		t.Errorf("/metrics on the API listener answered %d with --metrics-listen set, want 404", code)
	}
	eps := m.monitor.Spec.PodMetricsEndpoints
	if len(eps) != 1 || eps[0].Port == nil || *eps[0].Port != metrics.Name {
		t.Fatalf("the PodMonitor's endpoints are %v, want one on port %s", eps, metrics.Name)
	}
	if code, body := live.get(t, "metrics-listen", eps[0].Path); code != 200 || !strings.Contains(body, "listgate_build_info") {
		t.Errorf("the PodMonitor scrapes %s, which listgate's metrics listener answers with %d", eps[0].Path, code)
	}
	job := false
	for _, r := range eps[0].RelabelConfigs {
		job = job || r.TargetLabel == "job" && r.Replacement != nil && *r.Replacement == "listgate"
	}
	if !job {
		t.Errorf("the PodMonitor does not name the job listgate, as deploy/prometheus's alerts and the dashboard expect")
	}
	// The NetworkPolicy lets both listeners be reached.
	for flag, p := range byFlag {
		open := false
		for _, rule := range m.policy.Spec.Ingress {
			for _, rp := range rule.Ports {
				open = open || rp.Port != nil && flagOf("the NetworkPolicy", *rp.Port) == flag
			}
		}
		if !open {
			t.Errorf("the NetworkPolicy lets nothing reach port %s (--%s)", p.Name, flag)
		}
	}
}

// checkPod checks the pod's security, resources and shutdown.
func checkPod(t *testing.T, d *appsv1.Deployment, c container) {
	t.Helper()
	pod := d.Spec.Template.Spec
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("the pod's securityContext %+v: want runAsNonRoot and a runAsUser other than 0", psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the pod's seccompProfile is not RuntimeDefault")
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("the container's securityContext %+v: want a read-only root, no privilege escalation, every capability dropped", sc)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("no %s limit", r)
		}
	}
	// Go's soft heap limit sits below the container's limit, with room for
	// what is not heap (stacks, the runtime, buffers), and not far below.
	limit := c.Resources.Limits[corev1.ResourceMemory]
	soft, err := parseSize(c.flags["memory-limit"])
	if err != nil {
		t.Errorf("--memory-limit: %v (set it, to about 3/4 of the memory limit)", err)
	} else if ratio := float64(soft) / float64(limit.Value()); ratio < 0.6 || ratio > 0.9 {
		t.Errorf("--memory-limit=%s is %.0f%% of the memory limit %s, want 60–90%%", c.flags["memory-limit"], ratio*100, limit.String())
	}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			t.Errorf("GOMEMLIMIT is set: it wins over --memory-limit, which the limit is checked against")
		}
	}
	// SIGTERM comes after preStop; the gateway then has --shutdown-timeout
	// to finish its requests before the kubelet kills it.
	shutdown := 15 * time.Second
	if v := c.flags["shutdown-timeout"]; v != "" {
		if shutdown, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	preStop := time.Duration(0)
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	grace := 30 * time.Second
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if grace <= preStop+shutdown {
		t.Errorf("terminationGracePeriodSeconds %v leaves no room after preStop %v and --shutdown-timeout %v", grace, preStop, shutdown)
	}
	if len(pod.TopologySpreadConstraints) == 0 {
		t.Errorf("no topologySpreadConstraints: the replicas may share one node")
	}
	for _, tsc := range pod.TopologySpreadConstraints {
		if !selects(t, tsc.LabelSelector, d.Spec.Template.Labels) {
			t.Errorf("the spread over %s does not select the pods", tsc.TopologyKey)
		}
	}
	// A file a flag names must be mounted: the root filesystem is the image's.
	for name, value := range c.flags {
		if strings.HasSuffix(name, "-file") && mountOf(c, value) == nil {
			t.Errorf("--%s=%s is in no volume mount", name, value)
		}
	}
}

// checkNeighbours checks that the other objects select the Deployment's
// pods and agree with it.
func checkNeighbours(t *testing.T, m manifests) {
	t.Helper()
	d := m.deployment
	pods := d.Spec.Template.Labels
	if !selects(t, d.Spec.Selector, pods) {
		t.Errorf("the Deployment's selector does not select its own pods")
	}
	if len(m.service.Spec.Selector) == 0 || !labels.SelectorFromSet(m.service.Spec.Selector).Matches(labels.Set(pods)) {
		t.Errorf("the Service's selector %v does not select the pods %v", m.service.Spec.Selector, pods)
	}
	if !selects(t, m.pdb.Spec.Selector, pods) {
		t.Errorf("the PodDisruptionBudget does not select the pods")
	}
	if !selects(t, &m.policy.Spec.PodSelector, pods) {
		t.Errorf("the NetworkPolicy does not select the pods")
	}
	if !selects(t, &m.monitor.Spec.Selector, pods) {
		t.Errorf("the PodMonitor does not select the pods")
	}
	ref := m.hpa.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("the HorizontalPodAutoscaler scales %+v, not the Deployment %s", ref, d.Name)
	}
	if m.hpa.Spec.MinReplicas == nil || *m.hpa.Spec.MinReplicas < 2 {
		t.Errorf("the HorizontalPodAutoscaler may go down to one replica")
	}
	if u := m.pdb.Spec.MaxUnavailable; u == nil || m.hpa.Spec.MinReplicas != nil && u.IntValue() >= int(*m.hpa.Spec.MinReplicas) {
		t.Errorf("the PodDisruptionBudget's maxUnavailable %v lets every replica go at once", u)
	}
	for _, o := range []metav1.Object{m.service, m.pdb, m.hpa, m.policy, m.monitor} {
		if o.GetNamespace() != d.Namespace {
			t.Errorf("%s is in namespace %q, the Deployment in %q", o.GetName(), o.GetNamespace(), d.Namespace)
		}
	}
	if m.namespace != nil && m.namespace.Name != d.Namespace {
		t.Errorf("the Namespace %s is not the Deployment's (%s)", m.namespace.Name, d.Namespace)
	}
}

// checkSecretAuth checks that the credentials come from Secrets: the API
// keys file from a Secret volume, the other settings from secretKeyRefs.
func checkSecretAuth(t *testing.T, d *appsv1.Deployment, c container) {
	t.Helper()
	file := c.flags["api-keys-file"]
	if file == "" {
		t.Fatalf("no --api-keys-file")
	}
	mount := mountOf(c, file)
	if mount == nil {
		t.Fatalf("--api-keys-file=%s is in no volume mount", file)
	}
	if !mount.ReadOnly {
		t.Errorf("the volume mount %s is not read-only", mount.Name)
	}
	var secret *corev1.SecretVolumeSource
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name {
			secret = v.Secret
		}
	}
	if secret == nil || secret.SecretName == "" {
		t.Fatalf("the volume %s holding --api-keys-file is not a Secret", mount.Name)
	}
	rel := strings.TrimPrefix(file, path.Clean(mount.MountPath)+"/")
	if len(secret.Items) > 0 && !slices.ContainsFunc(secret.Items, func(k corev1.KeyToPath) bool { return k.Path == rel }) {
		t.Errorf("the Secret %s's items %v put nothing at %s", secret.SecretName, secret.Items, rel)
	}
	for _, e := range c.Env {
		if e.Value != "" && (strings.Contains(e.Name, "PASSWORD") || strings.Contains(e.Name, "JWT")) {
			t.Errorf("env %s is written in the manifest, not taken from a Secret", e.Name)
		}
	}
	for _, arg := range []string{"api-keys", "cql-password"} {
		if _, ok := c.flags[arg]; ok {
			t.Errorf("--%s is an arg: every reader of the Deployment sees it; take it from a Secret", arg)
		}
	}
}

// mountOf returns the container's volume mount that holds file, or nil.
func mountOf(c container, file string) *corev1.VolumeMount {
	for i, vm := range c.VolumeMounts {
		if strings.HasPrefix(path.Clean(file), path.Clean(vm.MountPath)+"/") {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// selects reports whether a label selector selects pods of these labels.
func selects(t *testing.T, sel *metav1.LabelSelector, pods map[string]string) bool {
	t.Helper()
	if sel == nil || len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		return false // an empty selector selects every pod of the namespace
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(pods))
}

// parseSize reads a listgate size flag (1048576, 512KiB, 64MiB, 1GiB) as
// a Kubernetes quantity, which writes the same binary suffixes as Ki, Mi, Gi.
func parseSize(s string) (int64, error) {
	q, err := resource.ParseQuantity(strings.TrimSuffix(s, "B"))
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}

// TestMigrateJob renders the schema step and checks it against the
// listgate command and the prod overlay: it runs listgate migrate with
// flags migrate takes, on the overlay's cluster, keyspace and data centre,
// with the overlay's image, namespace and CQL login, as the pod security
// standard "restricted" asks.
func TestMigrateJob(t *testing.T) {
	bin := buildListgate(t)
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "kubernetes/migrate")
	if err != nil {
		t.Fatalf("kustomize build kubernetes/migrate: %v", err)
	}
	var job batchv1.Job
	var cluster corev1.ConfigMap
	kinds := map[string]any{"Job": &job, "ConfigMap": &cluster}
	if len(resources.Resources()) != 2 {
		t.Fatalf("kubernetes/migrate renders %d objects, want a Job and the cluster's ConfigMap", len(resources.Resources()))
	}
	for _, r := range resources.Resources() {
		into, ok := kinds[r.GetKind()]
		if !ok {
			t.Fatalf("kubernetes/migrate renders a %s", r.GetKind())
		}
		delete(kinds, r.GetKind())
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatalf("the %s does not decode strictly: %v\n%s", r.GetKind(), err, doc)
		}
	}
	prod := render(t, "kubernetes/overlays/prod")
	gateway := prod.deployment.Spec.Template.Spec.Containers[0]
	pod := job.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("the Job runs %d containers, want one", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "migrate" {
		t.Fatalf("the Job's args are %q, want listgate migrate's", c.Args)
	}
	// Every arg is a flag migrate takes: one it does not stops the
	// parsing before --help.
	if out, err := runListgate(bin, append(slices.Clone(c.Args), "--help")...); err != nil || !strings.HasPrefix(out, "Usage: listgate migrate") {
		t.Errorf("listgate %s --help: %v\n%s", strings.Join(c.Args, " "), err, out)
	}
	flags := func(args []string) map[string]string {
		m := map[string]string{}
		for _, a := range args {
			name, value, _ := strings.Cut(a, "=")
			m[strings.TrimPrefix(name, "--")] = value
		}
		return m
	}
	mine, theirs := clusterFlags(t, &c, &cluster), clusterFlags(t, &gateway, prod.cluster)
	for _, f := range []string{"LISTGATE_CQL_HOSTS", "LISTGATE_CQL_KEYSPACE", "LISTGATE_CQL_LOCAL_DC"} {
		if mine[f] == "" || mine[f] != theirs[f] {
			t.Errorf("the Job's %s is %q, the prod Deployment's %q: migrate the cluster the gateways serve from", f, mine[f], theirs[f])
		}
	}
	if cluster.Name != prod.cluster.Name {
		t.Errorf("the Job reads the ConfigMap %s, the Deployment %s: one cluster, one ConfigMap", cluster.Name, prod.cluster.Name)
	}
	if flags(c.Args[1:])["mode"] != "prod" || mine["LISTGATE_CQL_REPLICATION"] == "" {
		t.Errorf("the Job runs listgate migrate without --mode=prod, or without the replication in its ConfigMap: %q %v", c.Args, mine)
	}
	// listgate migrate takes each of the ConfigMap's variables.
	help, err := runListgate(bin, "migrate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for k := range mine {
		if !strings.Contains(help, "("+k+")") && !strings.Contains(help, "("+k+",") {
			t.Errorf("the ConfigMap's %s is the variable of no flag of listgate migrate:\n%s", k, help)
		}
	}
	if c.Image != gateway.Image || job.Namespace != prod.deployment.Namespace {
		t.Errorf("the Job runs %s in namespace %q, the Deployment %s in %q", c.Image, job.Namespace, gateway.Image, prod.deployment.Namespace)
	}
	login := map[string]string{}
	for _, e := range gateway.Env {
		if strings.HasPrefix(e.Name, "LISTGATE_CQL_") {
			login[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	for _, e := range c.Env {
		if login[e.Name] != "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && login[e.Name] == e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key {
			delete(login, e.Name)
		}
	}
	if len(login) > 0 {
		t.Errorf("the Job lacks the Deployment's CQL login %v", login)
	}
	sc, csc := pod.SecurityContext, c.SecurityContext
	if pod.RestartPolicy != corev1.RestartPolicyNever || sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil ||
		csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 ||
		c.Resources.Limits.Memory().IsZero() {
		t.Errorf("the Job's pod is not restricted, restarts its container, or has no memory limit: %+v %+v", pod, c)
	}
}
