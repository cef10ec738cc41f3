// Command validate checks deploy/kubernetes without a cluster or the
// network: each document is decoded strictly into its k8s.io/api type (an
// unknown or misspelt field, a wrong type or an unparsable quantity
// fails, as the API server would refuse them), then held to what evfwd's
// deployment promises (docs/OPERATIONS.md, "Run it on a container
// platform"). A module of its own, so that evfwd's go.mod never carries
// Kubernetes.
//
// With -evfwd BINARY it also runs `evfwd serve --check` on the Secret's
// config file and store URL: serve itself judges the config the pods read.
//
//	go run . [-evfwd BINARY] [DIR]    (DIR default: the parent directory)
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	evfwd := flag.String("evfwd", "", "an evfwd `binary` to check the Secret's config with (serve --check)")
	flag.Parse()
	dir := ".."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no *.yaml in %s", dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "validate:", err)
		os.Exit(1)
	}
	docs := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "validate:", err)
			os.Exit(1)
		}
		docs[filepath.Base(f)] = b
	}
	objs, secret, err := validate(docs)
	if err == nil && *evfwd != "" {
		err = serveCheck(*evfwd, secret)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("validate: %s: %s ok\n", dir, strings.Join(objs, ", "))
}

// kinds are the objects the manifests may hold, by apiVersion and kind.
var kinds = map[string]func() any{
	"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
	"v1/Service":                    func() any { return &corev1.Service{} },
	"v1/Secret":                     func() any { return &corev1.Secret{} },
	"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
}

// manifests are the decoded objects, one of each kind.
type manifests struct {
	deploy  *appsv1.Deployment
	service *corev1.Service
	secret  *corev1.Secret
	pdb     *policyv1.PodDisruptionBudget
}

// validate decodes docs (file name → content) and checks them, returning
// the objects it read ("Kind/name") and the Secret.
func validate(docs map[string][]byte) ([]string, *corev1.Secret, error) {
	var m manifests
	var names []string
	var errs []error
	for _, file := range slices.Sorted(maps.Keys(docs)) {
		for i, doc := range bytes.Split(docs[file], []byte("\n---\n")) {
			where := fmt.Sprintf("%s#%d", file, i)
			obj, err := decode(doc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deploy, names = o, append(names, "Deployment/"+o.Name)
			case *corev1.Service:
				m.service, names = o, append(names, "Service/"+o.Name)
			case *corev1.Secret:
				m.secret, names = o, append(names, "Secret/"+o.Name)
			case *policyv1.PodDisruptionBudget:
				m.pdb, names = o, append(names, "PodDisruptionBudget/"+o.Name)
			}
		}
	}
	if len(errs) == 0 {
		errs = m.check()
	}
	return names, m.secret, errors.Join(errs...)
}

// serveCheck runs `evfwd serve --check` on the Secret's config file, store
// URL and admin token, as the Deployment hands them to serve.
func serveCheck(evfwd string, s *corev1.Secret) error {
	val := func(key string) string {
		if v, ok := s.StringData[key]; ok {
			return v
		}
		return string(s.Data[key])
	}
	dir, err := os.MkdirTemp("", "evfwd-validate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(val("config.yaml")), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(evfwd, "serve", "--check", "--config", cfg)
	cmd.Env = append(os.Environ(), "EVFWD_STORE="+val("store-url"), "EVFWD_ADMIN_TOKEN="+val("admin-token"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("evfwd serve --check on the Secret's config: %v\n%s", err, out)
	}
	return nil
}

// decode reads one document strictly into the type its apiVersion and
// kind name.
func decode(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	mk, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("apiVersion %q kind %q: not one evfwd's manifests use", tm.APIVersion, tm.Kind)
	}
	obj := mk()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// check holds the objects to the deployment's promises.
func (m manifests) check() []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if m.deploy == nil || m.service == nil || m.secret == nil || m.pdb == nil {
		return []error{errors.New("want a Deployment, a Service, a Secret and a PodDisruptionBudget")}
	}
	d := m.deploy
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		fail("deployment: want replicas: 3")
	}
	labels := d.Spec.Template.Labels
	if !selects(d.Spec.Selector.MatchLabels, labels) {
		fail("deployment: selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, labels)
	}
	if !selects(m.service.Spec.Selector, labels) || len(m.service.Spec.Selector) == 0 {
		fail("service: selector %v does not select the Deployment's pods %v", m.service.Spec.Selector, labels)
	}
	if m.pdb.Spec.Selector == nil || !selects(m.pdb.Spec.Selector.MatchLabels, labels) {
		fail("poddisruptionbudget: its selector does not select the Deployment's pods")
	}
	if mx := m.pdb.Spec.MinAvailable; mx == nil || d.Spec.Replicas != nil && mx.IntValue() >= int(*d.Spec.Replicas) {
		fail("poddisruptionbudget: want minAvailable under the replicas, so that a node can be drained")
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		return append(errs, fmt.Errorf("deployment: want one container, got %d", len(pod.Containers)))
	}
	c := pod.Containers[0]
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for _, p := range m.service.Spec.Ports {
		if !ports[p.TargetPort.String()] {
			fail("service: targetPort %s names no port of the container", p.TargetPort.String())
		}
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || !ports[p.HTTPGet.Port.String()] {
			fail("deployment: want a %s probe GET %s on a port of the container", name, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/livez")
	probe("readiness", c.ReadinessProbe, "/readyz")

	// SIGTERM comes after preStop; serve then takes --grace and 0.75 s more
	// to finish (docs/OPERATIONS.md): all of it within the grace period.
	var preStop time.Duration
	switch {
	case c.Lifecycle == nil || c.Lifecycle.PreStop == nil:
		fail("deployment: want a preStop hook that lets the Service forget the pod before SIGTERM")
	case c.Lifecycle.PreStop.Sleep != nil:
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	grace := 10 * time.Second // serve's default
	if i := slices.Index(c.Args, "--grace"); i >= 0 && i+1 < len(c.Args) {
		var err error
		if grace, err = time.ParseDuration(c.Args[i+1]); err != nil {
			fail("deployment: --grace %q: %v", c.Args[i+1], err)
		}
	}
	need := preStop + grace + time.Second
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second < need {
		fail("deployment: want terminationGracePeriodSeconds of at least %v (preStop %v, --grace %v, 1 s to stop)", need, preStop, grace)
	}

	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() {
		fail("deployment: want cpu and memory requests")
	}
	if lim.Memory().IsZero() || lim.Memory().Cmp(*req.Memory()) < 0 {
		fail("deployment: want a memory limit of at least the request")
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		fail("deployment: want runAsNonRoot")
	}

	// Secrets reach serve from the Secret, by keys it has.
	has := func(key string) bool {
		_, a := m.secret.StringData[key]
		_, b := m.secret.Data[key]
		return a || b
	}
	fromSecret := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name != m.secret.Name || !has(ref.Key) {
			fail("deployment: %s reads key %q of Secret %q, which the manifests do not hold", e.Name, ref.Key, ref.Name)
		}
		fromSecret[e.Name] = true
	}
	for _, name := range []string{"EVFWD_STORE", "EVFWD_ADMIN_TOKEN"} {
		if !fromSecret[name] {
			fail("deployment: want %s from a secretKeyRef", name)
		}
	}
	for _, v := range pod.Volumes {
		if s := v.Secret; s != nil {
			for _, it := range s.Items {
				if s.SecretName != m.secret.Name || !has(it.Key) {
					fail("deployment: volume %s reads key %q of Secret %q, which the manifests do not hold", v.Name, it.Key, s.SecretName)
				}
			}
		}
	}
	return errs
}

// selects reports whether every label of sel is in labels.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
