package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// k8sObject is one decoded manifest document.
type k8sObject struct {
	file string
	kind string
	obj  any // pointer to the typed API object
}

// kustomization is the subset of kustomize's Kustomization used here,
// decoded strictly too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// newTyped returns a pointer to the API type of apiVersion/kind.
func newTyped(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "v1/Namespace":
		return &corev1.Namespace{}, nil
	case "v1/Secret":
		return &corev1.Secret{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "batch/v1/CronJob":
		return &batchv1.CronJob{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		return &kustomization{}, nil
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &prometheusRule{}, nil // monitoring_test.go
	}
	return nil, fmt.Errorf("unsupported apiVersion %q kind %q (add its type to newTyped)", apiVersion, kind)
}

// decodeManifests strictly decodes every document of every file: an unknown
// or misspelled field, a duplicate key or a wrong type is an error.
func decodeManifests(files map[string]string) ([]k8sObject, []error) {
	var objs []k8sObject
	var errs []error
	for _, name := range sortedKeys(files) {
		docs, err := splitYAML(files[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if len(docs) == 0 {
			errs = append(errs, fmt.Errorf("%s: no document", name))
		}
		for i, doc := range docs {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				errs = append(errs, fmt.Errorf("%s doc %d: %w", name, i+1, err))
				continue
			}
			obj, err := newTyped(tm.APIVersion, tm.Kind)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s doc %d: %w", name, i+1, err))
				continue
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				errs = append(errs, fmt.Errorf("%s doc %d (%s): %w", name, i+1, tm.Kind, err))
				continue
			}
			objs = append(objs, k8sObject{file: name, kind: tm.Kind, obj: obj})
		}
	}
	return objs, errs
}

var (
	urlWithPassword = regexp.MustCompile(`://[^/@\s]*:[^/@\s]+@`)
	// secretFlag matches flags that would put a secret value in the pod
	// spec; the *-file variants are fine.
	secretFlag = regexp.MustCompile(`(?i)^--(psp-token|data-key|ui-password|ui-token|redis)(=|$)`)
)

// workload is a pod template with where it came from.
type workload struct {
	name   string
	labels map[string]string
	spec   corev1.PodSpec
}

// checkK8s decodes the manifests and checks how they fit together.
func checkK8s(files map[string]string) []error {
	objs, errs := decodeManifests(files)
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	var (
		namespaces = map[string]bool{}
		secrets    = map[string]map[string]bool{} // name -> keys (example only)
		configMaps = map[string]bool{}
		pvcs       = map[string]bool{}
		deploys    = map[string]*appsv1.Deployment{}
		workloads  []workload
		pdbs       []*policyv1.PodDisruptionBudget
		services   []*corev1.Service
		cronJobs   []*batchv1.CronJob
		kustomized []string
		manifests  []string
	)
	for _, o := range objs {
		if o.kind != "Kustomization" {
			manifests = append(manifests, o.file)
		}
		switch v := o.obj.(type) {
		case *corev1.Namespace:
			namespaces[v.Name] = true
		case *corev1.Secret:
			if !strings.HasSuffix(o.file, ".example.yaml") {
				fail("%s: Secret %s outside an *.example.yaml file: real secrets are never committed", o.file, v.Name)
			}
			keys := map[string]bool{}
			for k := range v.StringData {
				keys[k] = true
			}
			for k := range v.Data {
				keys[k] = true
			}
			secrets[v.Name] = keys
		case *corev1.ConfigMap:
			configMaps[v.Name] = true
			for k, val := range v.Data {
				if secretName.MatchString(k) && !strings.HasSuffix(k, "_USER") {
					fail("%s: ConfigMap %s key %s looks secret: put it in the Secret", o.file, v.Name, k)
				}
				if urlWithPassword.MatchString(val) {
					fail("%s: ConfigMap %s key %s holds a URL with a password", o.file, v.Name, k)
				}
			}
		case *corev1.PersistentVolumeClaim:
			pvcs[v.Name] = true
		case *appsv1.Deployment:
			deploys[v.Name] = v
			workloads = append(workloads, workload{"Deployment " + v.Name, v.Spec.Template.Labels, v.Spec.Template.Spec})
			sel, err := metav1.LabelSelectorAsSelector(v.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(v.Spec.Template.Labels)) {
				fail("Deployment %s: selector does not match its pod template labels", v.Name)
			}
		case *batchv1.CronJob:
			cronJobs = append(cronJobs, v)
			t := v.Spec.JobTemplate.Spec.Template
			workloads = append(workloads, workload{"CronJob " + v.Name, t.Labels, t.Spec})
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, v)
		case *corev1.Service:
			services = append(services, v)
		case *kustomization:
			kustomized = append(kustomized, v.Resources...)
		}
		if m, ok := o.obj.(metav1.Object); ok && o.kind != "Namespace" && m.GetNamespace() != "payout" {
			fail("%s: %s %s in namespace %q, want payout", o.file, o.kind, m.GetName(), m.GetNamespace())
		}
	}
	if !namespaces["payout"] {
		fail("no Namespace payout")
	}

	// The loader.
	if len(cronJobs) != 1 {
		fail("%d CronJob(s), want 1 (the loader)", len(cronJobs))
	}
	for _, cj := range cronJobs {
		if cj.Spec.Schedule != "* * * * *" {
			fail("CronJob %s schedule %q, want every minute", cj.Name, cj.Spec.Schedule)
		}
		if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			fail("CronJob %s concurrencyPolicy %q, want Forbid", cj.Name, cj.Spec.ConcurrencyPolicy)
		}
		if d := cj.Spec.StartingDeadlineSeconds; d == nil || *d <= 0 || *d >= 60 {
			fail("CronJob %s startingDeadlineSeconds %v, want 1..59 (skip a late tick, the next one comes)", cj.Name, d)
		}
		ps := cj.Spec.JobTemplate.Spec.Template.Spec
		if !mountsPVC(ps) {
			fail("CronJob %s does not mount the spool PVC", cj.Name)
		}
		if len(ps.Containers) == 0 || !strings.Contains(strings.Join(ps.Containers[0].Args, " "), "load --spool /var/spool/payout") {
			fail("CronJob %s does not run payout load --spool", cj.Name)
		}
	}

	// The workers.
	worker := findDeployment(deploys, "worker")
	if worker == nil {
		fail("no worker Deployment (label app.kubernetes.io/component: worker)")
	} else {
		if r := worker.Spec.Replicas; r == nil || *r != 2 {
			fail("worker replicas %v, want 2", r)
		}
		if g := worker.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < int64(2*pspTimeout.Seconds()) {
			fail("worker terminationGracePeriodSeconds %v, want at least %v (graceful stop past the PSP timeout)", g, 2*pspTimeout)
		}
		for _, c := range worker.Spec.Template.Spec.Containers {
			checkMetricsProbes(c, fail)
		}
		covered := 0
		for _, p := range pdbs {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			if err != nil || sel.Empty() {
				fail("PDB %s: bad or empty selector", p.Name)
				continue
			}
			if sel.Matches(labels.Set(worker.Spec.Template.Labels)) {
				covered++
				if p.Spec.MinAvailable != nil && worker.Spec.Replicas != nil && p.Spec.MinAvailable.IntValue() >= int(*worker.Spec.Replicas) {
					fail("PDB %s minAvailable %s >= replicas: node drains would block forever", p.Name, p.Spec.MinAvailable.String())
				}
			}
			for name, d := range deploys {
				if d != worker && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					fail("PDB %s also selects Deployment %s", p.Name, name)
				}
			}
		}
		if covered != 1 {
			fail("%d PodDisruptionBudget(s) select the worker pods, want 1", covered)
		}
	}

	// The UI and its Service.
	ui := findDeployment(deploys, "ui")
	if ui == nil {
		fail("no ui Deployment (label app.kubernetes.io/component: ui)")
	}
	for _, s := range services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		var target *appsv1.Deployment
		for _, d := range deploys {
			if len(s.Spec.Selector) > 0 && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				if target != nil {
					fail("Service %s selects more than one Deployment", s.Name)
				}
				target = d
			}
		}
		if target == nil {
			fail("Service %s selects no Deployment", s.Name)
			continue
		}
		for _, p := range s.Spec.Ports {
			if !hasContainerPort(target.Spec.Template.Spec, p.TargetPort.String()) {
				fail("Service %s targetPort %s is not a container port of %s", s.Name, p.TargetPort.String(), target.Name)
			}
		}
	}
	if ui != nil && len(services) == 0 {
		fail("no Service for the UI")
	}
	if ui != nil {
		for _, e := range checkSSO(ui, services) {
			fail("%v", e)
		}
	}

	// Every pod: non-root, limited, no secret literals, references resolve.
	for _, w := range workloads {
		checkPod(w, secrets, configMaps, pvcs, fail)
	}

	// kustomization.yaml applies everything but the example Secret.
	if len(kustomized) > 0 {
		want := map[string]bool{}
		for _, f := range manifests {
			if !strings.HasSuffix(f, ".example.yaml") {
				want[f] = true
			}
		}
		for _, r := range kustomized {
			if strings.HasSuffix(r, ".example.yaml") {
				fail("kustomization applies %s: it would overwrite the real Secret with placeholders", r)
			}
			delete(want, r)
		}
		for _, f := range sortedKeys(want) {
			fail("kustomization.yaml does not list %s", f)
		}
	}
	return errs
}

func findDeployment(deploys map[string]*appsv1.Deployment, component string) *appsv1.Deployment {
	for _, d := range deploys {
		if d.Spec.Template.Labels["app.kubernetes.io/component"] == component {
			return d
		}
	}
	return nil
}

func mountsPVC(ps corev1.PodSpec) bool {
	for _, v := range ps.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		for _, c := range ps.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name && m.MountPath == "/var/spool/payout" {
					return true
				}
			}
		}
	}
	return false
}

func hasContainerPort(ps corev1.PodSpec, port string) bool {
	for _, c := range ps.Containers {
		for _, p := range c.Ports {
			if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
				return true
			}
		}
	}
	return false
}

// checkMetricsProbes: readiness and liveness GET /metrics on the port the
// worker serves metrics on (--metrics-addr).
func checkMetricsProbes(c corev1.Container, fail func(string, ...any)) {
	addr := ""
	for i, a := range c.Args {
		if a == "--metrics-addr" && i+1 < len(c.Args) {
			addr = c.Args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--metrics-addr="); ok {
			addr = v
		}
	}
	_, metricsPort, _ := strings.Cut(addr, ":")
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/metrics" {
			fail("worker container %s: %s probe must GET /metrics", c.Name, name)
			continue
		}
		port := p.HTTPGet.Port.String()
		for _, cp := range c.Ports {
			if cp.Name == port {
				port = strconv.Itoa(int(cp.ContainerPort))
			}
		}
		if port != metricsPort {
			fail("worker container %s: %s probe on port %s, metrics served on %q", c.Name, name, port, addr)
		}
	}
}

// checkPod checks the security context, resources and references of one pod.
func checkPod(w workload, secrets map[string]map[string]bool, configMaps, pvcs map[string]bool, fail func(string, ...any)) {
	ps := w.spec
	podNonRoot := ps.SecurityContext != nil && ps.SecurityContext.RunAsNonRoot != nil && *ps.SecurityContext.RunAsNonRoot
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		fail("%s: automountServiceAccountToken must be false (payout never calls the Kubernetes API)", w.name)
	}
	if len(ps.InitContainers) > 0 {
		fail("%s: init containers are not checked here; add them to checkPod", w.name)
	}
	for _, c := range ps.Containers {
		where := w.name + " container " + c.Name
		sc := c.SecurityContext
		nonRoot := podNonRoot
		if sc != nil && sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
		if !nonRoot {
			fail("%s: runAsNonRoot is not true", where)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			fail("%s: readOnlyRootFilesystem is not true", where)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			fail("%s: allowPrivilegeEscalation is not false", where)
		}
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
			fail("%s: capabilities must drop ALL and add none", where)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Limits[r]; !ok {
				fail("%s: no %s limit", where, r)
			}
			if _, ok := c.Resources.Requests[r]; !ok {
				fail("%s: no %s request", where, r)
			}
		}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				ref := e.ValueFrom.SecretKeyRef
				if keys, ok := secrets[ref.Name]; !ok || !keys[ref.Key] {
					fail("%s: env %s refers to Secret %s key %s, which secret.example.yaml lacks", where, e.Name, ref.Name, ref.Key)
				}
			case secretName.MatchString(e.Name) && !strings.HasSuffix(e.Name, "_USER"):
				fail("%s: env %s looks secret but is not from a Secret (secretKeyRef)", where, e.Name)
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil && !configMaps[ef.ConfigMapRef.Name] {
				fail("%s: envFrom ConfigMap %s does not exist", where, ef.ConfigMapRef.Name)
			}
			if ef.SecretRef != nil {
				fail("%s: envFrom a whole Secret hands every secret to the process; use secretKeyRef", where)
			}
		}
		for _, a := range c.Args {
			if secretFlag.MatchString(a) {
				fail("%s: secret passed as argument %q (visible in the pod spec); use the *-file flag or env from a Secret", where, a)
			}
		}
		mounted := map[string]bool{}
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
		for _, v := range ps.Volumes {
			if !mounted[v.Name] {
				fail("%s: volume %s is not mounted", where, v.Name)
			}
		}
	}
	for _, v := range ps.Volumes {
		switch {
		case v.Secret != nil:
			keys, ok := secrets[v.Secret.SecretName]
			if !ok {
				fail("%s: volume %s: Secret %s is not in secret.example.yaml", w.name, v.Name, v.Secret.SecretName)
			}
			for _, it := range v.Secret.Items {
				if !keys[it.Key] {
					fail("%s: volume %s: Secret key %s is not in secret.example.yaml", w.name, v.Name, it.Key)
				}
			}
			if m := v.Secret.DefaultMode; m == nil || *m&0o007 != 0 {
				fail("%s: volume %s: secret files must not be world-readable (defaultMode 0440 or 0400)", w.name, v.Name)
			}
		case v.PersistentVolumeClaim != nil:
			if !pvcs[v.PersistentVolumeClaim.ClaimName] {
				fail("%s: volume %s: PVC %s does not exist", w.name, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
}

// readK8s reads every YAML file of deploy/k8s.
func readK8s(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("k8s", "*.y*ml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in k8s/: %v", err)
	}
	files := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = string(b)
	}
	return files
}

func TestK8sManifests(t *testing.T) {
	files := readK8s(t)
	objs, errs := decodeManifests(files)
	if len(errs) > 0 {
		t.Fatalf("decode:%s", errorsText(errs))
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.kind]++
	}
	for kind, n := range map[string]int{
		"Namespace": 1, "Secret": 1, "ConfigMap": 2, "PersistentVolumeClaim": 1, "CronJob": 1,
		"Deployment": 2, "PodDisruptionBudget": 1, "Service": 1, "Kustomization": 1, "PrometheusRule": 1,
	} {
		if kinds[kind] != n {
			t.Errorf("%d %s object(s), want %d", kinds[kind], kind, n)
		}
	}
	requireClean(t, "manifests", checkK8s(files))
}

func TestK8sChecksCatchBreakage(t *testing.T) {
	good := readK8s(t)
	for _, tc := range []struct {
		file string
		mutation
	}{
		{"worker-deployment.yaml", mutation{"misspelled field", "terminationGracePeriodSeconds: 90", "terminationGracePeriodSecond: 90", `unknown field "terminationGracePeriodSecond"`}},
		{"worker-deployment.yaml", mutation{"wrong type", "replicas: 2", "replicas: two", "replicas"}},
		{"worker-deployment.yaml", mutation{"duplicate key", "  replicas: 2\n", "  replicas: 2\n  replicas: 3\n", "replicas"}},
		{"worker-deployment.yaml", mutation{"short grace", "terminationGracePeriodSeconds: 90", "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds"}},
		{"worker-deployment.yaml", mutation{"one replica", "replicas: 2", "replicas: 1", "worker replicas"}},
		{"worker-deployment.yaml", mutation{"root", "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot"}},
		{"worker-deployment.yaml", mutation{"no limits", "            limits:\n              cpu: \"1\"\n              memory: 512Mi\n", "", "no cpu limit"}},
		{"worker-deployment.yaml", mutation{"caps kept", `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "drop ALL"}},
		{"worker-deployment.yaml", mutation{"writable root", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"}},
		{"worker-deployment.yaml", mutation{"probe path", "path: /metrics\n              port: metrics\n            periodSeconds: 10", "path: /healthz\n              port: metrics\n            periodSeconds: 10", "probe must GET /metrics"}},
		{"worker-deployment.yaml", mutation{"other namespace", "  namespace: payout\n", "  namespace: default\n", `in namespace "default"`}},
		{"worker-deployment.yaml", mutation{"probe port", `- ":9102"`, `- ":9103"`, "metrics served on"}},
		{"worker-deployment.yaml", mutation{"unknown secret key", "key: psp-token", "key: psp_token", "psp_token"}},
		{"worker-deployment.yaml", mutation{"world-readable", "defaultMode: 0440", "defaultMode: 0444", "world-readable"}},
		{"ui.yaml", mutation{"literal password", "            - name: PAYOUT_UI_PASSWORD\n              valueFrom:\n                secretKeyRef:\n                  name: payout\n                  key: ui-password\n", "            - name: PAYOUT_UI_PASSWORD\n              value: hunter2\n", "looks secret"}},
		{"ui.yaml", mutation{"bad target port", "targetPort: http", "targetPort: web", "targetPort web"}},
		{"ui.yaml", mutation{"sso bypassed", "targetPort: http", "targetPort: ui", "bypass single sign-on"}},
		{"ui.yaml", mutation{"no user header", `"--proxy-user-header", "X-Forwarded-User"`, `"--read-only"`, "--proxy-user-header"}},
		{"ui.yaml", mutation{"proxy trusted from anywhere", `"--trusted-proxies", "127.0.0.1"`, `"--trusted-proxies", "10.0.0.0/8"`, "--trusted-proxies 127.0.0.1"}},
		{"loader-cronjob.yaml", mutation{"allow overlap", "concurrencyPolicy: Forbid", "concurrencyPolicy: Allow", "Forbid"}},
		{"loader-cronjob.yaml", mutation{"no deadline", "  startingDeadlineSeconds: 50\n", "", "startingDeadlineSeconds"}},
		{"loader-cronjob.yaml", mutation{"hourly", `schedule: "* * * * *"`, `schedule: "0 * * * *"`, "every minute"}},
		{"loader-cronjob.yaml", mutation{"wrong pvc", "claimName: payout-spool", "claimName: spool", "PVC spool does not exist"}},
		{"loader-cronjob.yaml", mutation{"token in argv", "- --data-key-file\n", "- --data-key=abc\n                - --data-key-file\n", "secret passed as argument"}},
		{"configmap.yaml", mutation{"secret in configmap", "PAYOUT_UI_USER: ops", "PAYOUT_UI_PASSWORD: hunter2", "looks secret"}},
		{"configmap.yaml", mutation{"url password", "https://psp.example.invalid", "https://u:hunter2@psp.example.invalid", "URL with a password"}},
		{"kustomization.yaml", mutation{"file not applied", "  - ui.yaml\n", "", "does not list ui.yaml"}},
		{"kustomization.yaml", mutation{"example applied", "  - ui.yaml\n", "  - ui.yaml\n  - secret.example.yaml\n", "overwrite the real Secret"}},
		{"namespace.yaml", mutation{"unknown kind", "kind: Namespace", "kind: Namespaces", "unsupported"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range good {
				files[k] = v
			}
			files[tc.file] = tc.apply(t, good[tc.file])
			requireErr(t, checkK8s(files), tc.wantErr)
		})
	}
	t.Run("real secret committed", func(t *testing.T) {
		files := map[string]string{}
		for k, v := range good {
			files[k] = v
		}
		files["secret.yaml"] = good["secret.example.yaml"]
		requireErr(t, checkK8s(files), "outside an *.example.yaml")
	})
	t.Run("pdb selects nothing", func(t *testing.T) {
		files := map[string]string{}
		for k, v := range good {
			files[k] = v
		}
		w := good["worker-deployment.yaml"]
		i := strings.LastIndex(w, "app.kubernetes.io/component: worker")
		files["worker-deployment.yaml"] = w[:i] + "app.kubernetes.io/component: workers" + w[i+len("app.kubernetes.io/component: worker"):]
		requireErr(t, checkK8s(files), "0 PodDisruptionBudget(s) select the worker pods")
	})
	t.Run("service selects nothing", func(t *testing.T) {
		files := map[string]string{}
		for k, v := range good {
			files[k] = v
		}
		u := good["ui.yaml"]
		i := strings.LastIndex(u, "app.kubernetes.io/component: ui")
		files["ui.yaml"] = u[:i] + "app.kubernetes.io/component: web" + u[i+len("app.kubernetes.io/component: ui"):]
		requireErr(t, checkK8s(files), "selects no Deployment")
	})
}

// checkSSO: the UI pod runs oauth2-proxy beside the UI, forwarding to it
// on 127.0.0.1; the UI believes the proxy's user header from 127.0.0.1
// only; every Service of the UI goes through the proxy.
func checkSSO(ui *appsv1.Deployment, services []*corev1.Service) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	var app, proxy *corev1.Container
	for i, c := range ui.Spec.Template.Spec.Containers {
		switch {
		case strings.Contains(c.Image, "oauth2-proxy"):
			proxy = &ui.Spec.Template.Spec.Containers[i]
		case len(c.Args) > 0 && c.Args[0] == "ui":
			app = &ui.Spec.Template.Spec.Containers[i]
		}
	}
	if app == nil || proxy == nil {
		fail("Deployment %s: want the UI and an oauth2-proxy container (single sign-on)", ui.Name)
		return errs
	}
	args := strings.Join(app.Args, " ")
	if !strings.Contains(args, "--proxy-user-header X-Forwarded-User") || !strings.Contains(args, "--trusted-proxies 127.0.0.1") {
		fail("UI args %q: want --proxy-user-header X-Forwarded-User and --trusted-proxies 127.0.0.1 (the sidecar)", args)
	}
	pargs := strings.Join(proxy.Args, " ")
	for _, want := range []string{"--upstream=http://127.0.0.1:8080/", "--pass-user-headers=true"} {
		if !strings.Contains(pargs, want) {
			fail("oauth2-proxy args lack %s", want)
		}
	}
	proxyPorts := map[string]bool{}
	for _, p := range proxy.Ports {
		proxyPorts[p.Name] = true
		proxyPorts[fmt.Sprint(p.ContainerPort)] = true
	}
	sel := ui.Spec.Template.Labels
	for _, s := range services {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(sel)) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if !proxyPorts[p.TargetPort.String()] {
				fail("Service %s targets %s, not oauth2-proxy: it would bypass single sign-on", s.Name, p.TargetPort.String())
			}
		}
	}
	return errs
}
