// k8s-decode judges the Kubernetes objects terravixens' gitops layer makes, the way the API server and the
// controllers that own them would read them, without a cluster.
//
// It reads one JSON request on standard input: a list of renders, each a name and a multi-document YAML stream
// (what `helm template` prints for one of our charts, or the objects of the kubernetes_* resources). Every
// document is decoded strictly into the Go type of its apiVersion and kind, taken from the owners' own API
// modules (k8s.io/api core and batch, Flux's source-controller and kustomize-controller APIs, Cilium's v2alpha1 API,
// and Talos' talos.dev/v1alpha1 ServiceAccount as the CRD Talos installs declares it): an unknown or duplicate
// field, a wrong type or an unknown kind is an error. Then the values the types leave as
// strings are parsed as their owners parse them: object names, label selectors, Flux intervals and timeouts
// (Go durations, the CRDs' pattern), Git URLs, LB-IPAM CIDRs and start/stop addresses, L2 interface regexps; and
// across objects, LoadBalancer IP pools may not overlap (Cilium's operator marks the later pool Conflicting and
// hands out none of its addresses); a CronJob's schedule is parsed by robfig/cron's standard parser, as the API server's
// validation does, its time zone loaded, its pod template checked as the API server checks what a Job may run.
//
// It prints one JSON document: the module versions it was built with, the number of objects judged, and per
// object its render, kind, name and errors, each error naming the field (docs/adr/0043-chart-sources.md).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // the API server validates a CronJob's timeZone against the time zone database

	ciliumv2alpha1 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	slimv1 "github.com/cilium/cilium/pkg/k8s/slim/k8s/apis/meta/v1"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Modules whose versions -version prints: the judges' provenance.
var judgedModules = []string{
	"k8s.io/api",
	"k8s.io/apimachinery",
	"github.com/fluxcd/source-controller/api",
	"github.com/fluxcd/kustomize-controller/api",
	"github.com/cilium/cilium",
	"github.com/robfig/cron/v3",
}

// talosRoles are the roles Talos' RBAC knows (talos pkg/machinery/role: Admin, Operator, Reader, EtcdBackup,
// Impersonator); a Talos ServiceAccount naming another is refused by Talos' controller.
var talosRoles = map[string]bool{
	"os:admin": true, "os:operator": true, "os:reader": true, "os:etcd:backup": true, "os:impersonator": true,
}

// talosServiceAccount is Talos' talos.dev/v1alpha1 ServiceAccount, with the fields of the CRD Talos installs
// (internal/app/machined/pkg/controllers/k8s/internal/k8stemplates: spec.roles, status.failureReason): Talos writes
// a talosconfig limited to those roles into a Secret of the same name.
type talosServiceAccount struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              talosServiceAccountSpec   `json:"spec"`
	Status            talosServiceAccountStatus `json:"status,omitempty"`
}

type talosServiceAccountSpec struct {
	Roles []string `json:"roles,omitempty"`
}

type talosServiceAccountStatus struct {
	FailureReason string `json:"failureReason,omitempty"`
}

func (account *talosServiceAccount) DeepCopyObject() runtime.Object {
	copied := *account
	copied.ObjectMeta = *account.ObjectMeta.DeepCopy()
	copied.Spec.Roles = append([]string(nil), account.Spec.Roles...)
	return &copied
}

// fluxDuration is the pattern Flux's CRDs put on interval and timeout (the API server enforces it before the
// controller ever parses the value).
var fluxDuration = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`)

// Render is one stream of YAML documents and the name the caller knows it by.
type Render struct {
	Name     string `json:"name"`
	Manifest string `json:"manifest"`
}

// Input is the whole request.
type Input struct {
	Renders []Render `json:"renders"`
}

// Verdict is one object's result.
type Verdict struct {
	Render string   `json:"render"`
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	OK     bool     `json:"ok"`
	Errors []string `json:"errors"`
}

// Output is what the tool prints.
type Output struct {
	Modules map[string]string `json:"modules"`
	Objects int               `json:"objects"`
	Kinds   map[string]int    `json:"kinds"`
	Results []Verdict         `json:"results"`
}

type pool struct {
	render, name, field string
	prefix              netip.Prefix
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, batchv1.AddToScheme, sourcev1.AddToScheme, kustomizev1.AddToScheme,
		ciliumv2alpha1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	scheme.AddKnownTypeWithName(
		schema.GroupVersion{Group: "talos.dev", Version: "v1alpha1"}.WithKind("ServiceAccount"), &talosServiceAccount{})
	return scheme
}

func modules() map[string]string {
	found := map[string]string{}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return found
	}
	for _, dep := range info.Deps {
		for _, wanted := range judgedModules {
			if dep.Path == wanted {
				found[wanted] = dep.Version
			}
		}
	}
	return found
}

// documents splits a YAML stream on document markers, dropping empty documents as kubectl and Helm do.
func documents(stream string) []string {
	var found []string
	var current []string
	flush := func() {
		text := strings.TrimSpace(strings.Join(current, "\n"))
		current = nil
		if text == "" {
			return
		}
		for _, line := range strings.Split(text, "\n") {
			trimmed := strings.TrimSpace(line)
			if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
				found = append(found, text)
				return
			}
		}
	}
	for _, line := range strings.Split(stream, "\n") {
		if line == "---" || strings.HasPrefix(line, "--- ") {
			flush()
			continue
		}
		current = append(current, line)
	}
	flush()
	return found
}

func judge(scheme *runtime.Scheme, render, document string, pools *[]pool) Verdict {
	verdict := Verdict{Render: render, Kind: "?", Name: "?"}
	fail := func(format string, args ...any) {
		verdict.Errors = append(verdict.Errors, fmt.Sprintf(format, args...))
	}

	// Duplicate keys are errors here, as in the API server's strict decoding.
	data, err := yaml.YAMLToJSONStrict([]byte(document))
	if err != nil {
		fail("not YAML the API server would read: %v", err)
		return verdict
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		fail("not an object: %v", err)
		return verdict
	}
	verdict.Kind, verdict.Name = head.Kind, head.Metadata.Name
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		fail("apiVersion: %v", err)
		return verdict
	}
	object, err := scheme.New(gv.WithKind(head.Kind))
	if err != nil {
		fail("apiVersion/kind %s %s: no such type in the judged API modules", head.APIVersion, head.Kind)
		return verdict
	}
	// metav1.Duration's decoder names no field when a duration does not parse: Flux's durations are read raw
	// first, against the pattern the CRDs give them (what the API server enforces before any controller).
	if strings.HasSuffix(gv.Group, ".toolkit.fluxcd.io") {
		var raw struct {
			Spec map[string]any `json:"spec"`
		}
		if json.Unmarshal(data, &raw) == nil {
			for _, key := range []string{"interval", "timeout", "retryInterval"} {
				if value, present := raw.Spec[key]; present {
					text, isText := value.(string)
					if !isText {
						fail("spec.%s: %v is a %T, Flux's CRD says a duration string (e.g. 10m)", key, value, value)
						continue
					}
					duration("spec."+key, text, false, fail)
				}
			}
		}
		if len(verdict.Errors) > 0 {
			return verdict
		}
	}
	strict, err := kjson.UnmarshalStrict(data, object)
	if err != nil {
		fail("%s", decodeError(err))
		return verdict
	}
	// Unknown and duplicate fields: reported, and the rest of the object is still judged.
	for _, problem := range strict {
		fail("%v", problem)
	}
	meta, ok := object.(metav1.Object)
	if !ok {
		fail("has no object metadata")
		return verdict
	}
	for _, problem := range validation.IsDNS1123Subdomain(meta.GetName()) {
		fail("metadata.name: %q: %s", meta.GetName(), problem)
	}
	if namespace := meta.GetNamespace(); namespace != "" {
		for _, problem := range validation.IsDNS1123Label(namespace) {
			fail("metadata.namespace: %q: %s", namespace, problem)
		}
	}
	switch typed := object.(type) {
	case *corev1.Namespace:
		for _, problem := range validation.IsDNS1123Label(typed.Name) {
			fail("metadata.name: %q: %s (a namespace name is a DNS label)", typed.Name, problem)
		}
	case *corev1.Secret:
		judgeSecret(typed, fail)
	case *sourcev1.GitRepository:
		judgeGitRepository(typed, fail)
	case *kustomizev1.Kustomization:
		judgeKustomization(typed, fail)
	case *ciliumv2alpha1.CiliumLoadBalancerIPPool:
		*pools = append(*pools, judgePool(render, typed, fail)...)
	case *ciliumv2alpha1.CiliumL2AnnouncementPolicy:
		judgeL2Policy(typed, fail)
	case *batchv1.CronJob:
		judgeCronJob(typed, fail)
	case *talosServiceAccount:
		if len(typed.Spec.Roles) == 0 {
			fail("spec.roles: a Talos service account without roles can call nothing")
		}
		for index, name := range typed.Spec.Roles {
			if !talosRoles[name] {
				fail("spec.roles[%d]: %q is not a Talos role (os:admin, os:operator, os:reader, os:etcd:backup, "+
					"os:impersonator)", index, name)
			}
		}
	}
	return verdict
}

// decodeError keeps the decoder's own words: they name the Go field path (e.g. "GitRepositorySpec.spec.interval")
// for a wrong type, and the JSON path for an unknown field.
func decodeError(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("not JSON at offset %d: %v", syntax.Offset, err)
	}
	return err.Error()
}

func duration(field, value string, required bool, fail func(string, ...any)) {
	if value == "" {
		if required {
			fail("%s: is required", field)
		}
		return
	}
	if !fluxDuration.MatchString(value) {
		fail("%s: %q is not a duration Flux's CRD accepts (pattern %s, e.g. 10m or 1h30m)", field, value, fluxDuration)
		return
	}
	if parsed, err := time.ParseDuration(value); err != nil {
		fail("%s: %q: %v", field, value, err)
	} else if parsed <= 0 {
		fail("%s: %q must be longer than zero", field, value)
	}
}

func selector(field string, raw any, fail func(string, ...any)) {
	if raw == nil {
		return
	}
	data, err := json.Marshal(raw)
	if err != nil {
		fail("%s: %v", field, err)
		return
	}
	var parsed metav1.LabelSelector
	if err := json.Unmarshal(data, &parsed); err != nil {
		fail("%s: %v", field, err)
		return
	}
	if _, err := metav1.LabelSelectorAsSelector(&parsed); err != nil {
		fail("%s: %v", field, err)
	}
}

func judgeSecret(secret *corev1.Secret, fail func(string, ...any)) {
	for key := range secret.StringData {
		for _, problem := range validation.IsConfigMapKey(key) {
			fail("stringData.%s: %s", key, problem)
		}
	}
	for key := range secret.Data {
		for _, problem := range validation.IsConfigMapKey(key) {
			fail("data.%s: %s", key, problem)
		}
	}
}

func judgeGitRepository(repository *sourcev1.GitRepository, fail func(string, ...any)) {
	spec := repository.Spec
	if spec.Interval.Duration <= 0 {
		fail("spec.interval: %q must be longer than zero", spec.Interval.Duration)
	}
	parsed, err := url.Parse(spec.URL)
	switch {
	case err != nil:
		fail("spec.url: %q: %v", spec.URL, err)
	case parsed.Scheme != "http" && parsed.Scheme != "https" && parsed.Scheme != "ssh":
		fail("spec.url: %q: Flux's CRD takes http, https or ssh URLs only", spec.URL)
	case parsed.Host == "":
		fail("spec.url: %q has no host", spec.URL)
	}
	if spec.Reference == nil || (spec.Reference.Branch == "" && spec.Reference.Tag == "" && spec.Reference.SemVer == "" &&
		spec.Reference.Name == "" && spec.Reference.Commit == "") {
		fail("spec.ref: names no branch, tag, semver, name or commit")
	}
	if spec.SecretRef != nil {
		for _, problem := range validation.IsDNS1123Subdomain(spec.SecretRef.Name) {
			fail("spec.secretRef.name: %q: %s", spec.SecretRef.Name, problem)
		}
	}
}

func judgeKustomization(kustomization *kustomizev1.Kustomization, fail func(string, ...any)) {
	spec := kustomization.Spec
	if spec.Interval.Duration <= 0 {
		fail("spec.interval: %q must be longer than zero", spec.Interval.Duration)
	}
	switch spec.SourceRef.Kind {
	case sourcev1.GitRepositoryKind, sourcev1.OCIRepositoryKind, sourcev1.BucketKind, "ExternalArtifact":
	default:
		fail("spec.sourceRef.kind: %q is not GitRepository, OCIRepository, Bucket or ExternalArtifact", spec.SourceRef.Kind)
	}
	for _, problem := range validation.IsDNS1123Subdomain(spec.SourceRef.Name) {
		fail("spec.sourceRef.name: %q: %s", spec.SourceRef.Name, problem)
	}
	if spec.Decryption != nil {
		if spec.Decryption.Provider != "sops" {
			fail("spec.decryption.provider: %q: Flux knows only sops", spec.Decryption.Provider)
		}
		if spec.Decryption.SecretRef != nil {
			for _, problem := range validation.IsDNS1123Subdomain(spec.Decryption.SecretRef.Name) {
				fail("spec.decryption.secretRef.name: %q: %s", spec.Decryption.SecretRef.Name, problem)
			}
		}
	}
}

func judgePool(render string, ippool *ciliumv2alpha1.CiliumLoadBalancerIPPool, fail func(string, ...any)) []pool {
	var found []pool
	spec := ippool.Spec
	if len(spec.Blocks) == 0 {
		fail("spec.blocks: a pool without blocks hands out no address")
	}
	switch spec.AllowFirstLastIPs {
	case "", ciliumv2alpha1.AllowFirstLastIPNo, ciliumv2alpha1.AllowFirstLastIPYes:
	default:
		fail("spec.allowFirstLastIPs: %q is neither Yes nor No", spec.AllowFirstLastIPs)
	}
	selectorOf("spec.serviceSelector", spec.ServiceSelector, fail)
	for index, block := range spec.Blocks {
		field := fmt.Sprintf("spec.blocks[%d]", index)
		if block.Cidr != "" {
			prefix, err := netip.ParsePrefix(string(block.Cidr))
			if err != nil {
				fail("%s.cidr: %q: %v", field, block.Cidr, err)
				continue
			}
			if prefix.Masked() != prefix {
				fail("%s.cidr: %q has host bits set (Cilium reads it as %s)", field, block.Cidr, prefix.Masked())
			}
			found = append(found, pool{render, ippool.Name, field + ".cidr", prefix.Masked()})
			if block.Start != "" || block.Stop != "" {
				fail("%s: give either cidr or start/stop, not both", field)
			}
			continue
		}
		start, startErr := netip.ParseAddr(block.Start)
		stop, stopErr := netip.ParseAddr(block.Stop)
		switch {
		case startErr != nil:
			fail("%s.start: %q: %v", field, block.Start, startErr)
		case block.Stop != "" && stopErr != nil:
			fail("%s.stop: %q: %v", field, block.Stop, stopErr)
		case block.Stop != "" && stop.Less(start):
			fail("%s: stop %s is before start %s", field, stop, start)
		}
	}
	return found
}

func selectorOf(field string, value *slimv1.LabelSelector, fail func(string, ...any)) {
	if value != nil {
		selector(field, value, fail)
	}
}

func judgeL2Policy(policy *ciliumv2alpha1.CiliumL2AnnouncementPolicy, fail func(string, ...any)) {
	spec := policy.Spec
	selectorOf("spec.nodeSelector", spec.NodeSelector, fail)
	selectorOf("spec.serviceSelector", spec.ServiceSelector, fail)
	if !spec.LoadBalancerIPs && !spec.ExternalIPs {
		fail("spec: announces neither loadBalancerIPs nor externalIPs")
	}
	for index, pattern := range spec.Interfaces {
		if _, err := regexp.Compile(pattern); err != nil {
			fail("spec.interfaces[%d]: %q is not a regular expression Cilium can compile: %v", index, pattern, err)
		}
	}
}

// judgeCronJob checks what the API server's validation (k8s.io/kubernetes pkg/apis/batch/validation and core's
// pod validation) refuses in what our CronJob sets: the schedule through robfig/cron's standard parser (as the API
// server; a TZ prefix refused), the time zone in the database, the policies' enums, and the Job's pod: a restart
// policy a Job accepts, container names unique DNS labels, an image, environment names, secret key references,
// mounts of declared volumes at absolute paths.
func judgeCronJob(job *batchv1.CronJob, fail func(string, ...any)) {
	spec := job.Spec
	if strings.Contains(spec.Schedule, "TZ") {
		fail("spec.schedule: %q: a time zone in the schedule is refused: use spec.timeZone", spec.Schedule)
	} else if _, err := cron.ParseStandard(spec.Schedule); err != nil {
		fail("spec.schedule: %q: %v", spec.Schedule, err)
	}
	if spec.TimeZone != nil {
		if _, err := time.LoadLocation(*spec.TimeZone); err != nil || *spec.TimeZone == "" || *spec.TimeZone == "Local" {
			fail("spec.timeZone: %q is not a time zone of the database", *spec.TimeZone)
		}
	}
	switch spec.ConcurrencyPolicy {
	case "", batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	default:
		fail("spec.concurrencyPolicy: %q is not Allow, Forbid or Replace", spec.ConcurrencyPolicy)
	}
	pod := spec.JobTemplate.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever && pod.RestartPolicy != corev1.RestartPolicyOnFailure {
		fail("spec.jobTemplate.spec.template.spec.restartPolicy: %q: a Job's pod restarts Never or OnFailure",
			pod.RestartPolicy)
	}
	volumes := map[string]bool{}
	for index, volume := range pod.Volumes {
		for _, problem := range validation.IsDNS1123Label(volume.Name) {
			fail("spec.jobTemplate.spec.template.spec.volumes[%d].name: %q: %s", index, volume.Name, problem)
		}
		if volume.Secret != nil {
			for _, problem := range validation.IsDNS1123Subdomain(volume.Secret.SecretName) {
				fail("volumes[%d].secret.secretName: %q: %s", index, volume.Secret.SecretName, problem)
			}
		}
		volumes[volume.Name] = true
	}
	names := map[string]bool{}
	all := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
	if len(pod.Containers) == 0 {
		fail("spec.jobTemplate.spec.template.spec.containers: a pod needs at least one container")
	}
	for _, container := range all {
		field := "container " + container.Name
		for _, problem := range validation.IsDNS1123Label(container.Name) {
			fail("%s: name: %s", field, problem)
		}
		if names[container.Name] {
			fail("%s: the name is used twice in the pod", field)
		}
		names[container.Name] = true
		if strings.TrimSpace(container.Image) == "" {
			fail("%s: image: is required", field)
		}
		for _, variable := range container.Env {
			for _, problem := range validation.IsEnvVarName(variable.Name) {
				fail("%s: env %q: %s", field, variable.Name, problem)
			}
			if variable.ValueFrom != nil && variable.ValueFrom.SecretKeyRef != nil {
				ref := variable.ValueFrom.SecretKeyRef
				for _, problem := range validation.IsDNS1123Subdomain(ref.Name) {
					fail("%s: env %q: secretKeyRef.name %q: %s", field, variable.Name, ref.Name, problem)
				}
				for _, problem := range validation.IsConfigMapKey(ref.Key) {
					fail("%s: env %q: secretKeyRef.key %q: %s", field, variable.Name, ref.Key, problem)
				}
			}
		}
		for _, mount := range container.VolumeMounts {
			if !volumes[mount.Name] {
				fail("%s: volumeMounts: %q is not a volume of the pod", field, mount.Name)
			}
			if !strings.HasPrefix(mount.MountPath, "/") {
				fail("%s: volumeMounts: %q is not an absolute path", field, mount.MountPath)
			}
		}
		if context := container.SecurityContext; context != nil && context.RunAsUser != nil && *context.RunAsUser == 0 &&
			context.RunAsNonRoot != nil && *context.RunAsNonRoot {
			fail("%s: securityContext: runAsNonRoot with runAsUser 0", field)
		}
	}
}

// overlaps reports every pool block that overlaps a block of another pool (or another block of its own), on
// the later object, as Cilium's operator marks the later pool Conflicting.
func overlaps(pools []pool, verdicts []Verdict, index map[string]int) {
	for later := range pools {
		for earlier := 0; earlier < later; earlier++ {
			a, b := pools[earlier], pools[later]
			if a.render != b.render || !a.prefix.Overlaps(b.prefix) {
				continue
			}
			at := index[b.render+"\x00"+b.name]
			verdicts[at].Errors = append(verdicts[at].Errors, fmt.Sprintf(
				"%s: %s overlaps %s of CiliumLoadBalancerIPPool %s: Cilium marks this pool Conflicting and "+
					"hands out none of its addresses", b.field, b.prefix, a.prefix, a.name))
		}
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-version" {
		names := make([]string, 0, len(judgedModules))
		found := modules()
		for _, name := range judgedModules {
			names = append(names, name+" "+found[name])
		}
		fmt.Println(strings.Join(names, "\n"))
		return
	}
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-decode: reading standard input:", err)
		os.Exit(2)
	}
	var input Input
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&input); err != nil {
		fmt.Fprintln(os.Stderr, "k8s-decode: the request is not {\"renders\": [{\"name\", \"manifest\"}]}:", err)
		os.Exit(2)
	}
	scheme := newScheme()
	output := Output{Modules: modules(), Kinds: map[string]int{}, Results: []Verdict{}}
	var pools []pool
	index := map[string]int{}
	for _, render := range input.Renders {
		for _, document := range documents(render.Manifest) {
			verdict := judge(scheme, render.Name, document, &pools)
			index[render.Name+"\x00"+verdict.Name] = len(output.Results)
			output.Results = append(output.Results, verdict)
			output.Kinds[verdict.Kind]++
		}
	}
	overlaps(pools, output.Results, index)
	for at := range output.Results {
		output.Results[at].OK = len(output.Results[at].Errors) == 0
		if output.Results[at].Errors == nil {
			output.Results[at].Errors = []string{}
		}
		sort.Strings(output.Results[at].Errors)
	}
	output.Objects = len(output.Results)
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(output); err != nil {
		fmt.Fprintln(os.Stderr, "k8s-decode:", err)
		os.Exit(2)
	}
}
