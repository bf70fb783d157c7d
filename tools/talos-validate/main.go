// talos-validate checks machine configurations the way Talos itself would see them, without Terraform and
// without a node.
//
// For every node it is given (JSON on standard input), it
//  1. generates the role's machine configuration as the siderolabs/talos provider's (v0.11.0)
//     `talos_machine_configuration` data source does: version contract from talos_version, Kubernetes version
//     without its "v", the provider's default generate options, the data source's config_patches applied to the
//     role, comments per the docs/examples flags;
//  2. applies the node's `talos_machine_configuration_apply.config_patches` onto that output as the apply
//     resource does (configpatcher.Apply over the bytes);
//  3. loads the result as a node does on ApplyConfiguration and validates it with Talos' own validator, in the
//     runtime mode given (default metal: install instructions are required) with the local option
//     `talosctl validate` uses (no node-side state).
//
// It prints one JSON document: the machinery version it was built with and, per node, ok / errors / warnings
// and the kinds of the configuration documents. The secrets bundle is generated in memory (or read from a file
// given with -secrets, e.g. `talosctl gen secrets`); it is never written anywhere.
//
// One source, built once per supported Talos minor against that minor's machinery module: see go.v1.*.mod and
// the Makefile (docs/adr/0014-talos-validate.md).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ghodss/yaml"
	"github.com/hashicorp/go-multierror"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/compatibility"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/bundle"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"github.com/siderolabs/talos/pkg/machinery/constants"
)

const machineryModule = "github.com/siderolabs/talos/pkg/machinery"

// providerSecretsContract is what talos_machine_secrets uses when talos_version is not set (terravixens never
// sets it): the provider's own machinery minor, v1.13 for siderolabs/talos v0.11.0.
const providerSecretsContract = "v1.13"

// DataSource holds the attributes of a talos_machine_configuration data source, as synthesized.
type DataSource struct {
	ClusterName       string   `json:"cluster_name"`
	ClusterEndpoint   string   `json:"cluster_endpoint"`
	MachineType       string   `json:"machine_type"`
	TalosVersion      string   `json:"talos_version"`
	KubernetesVersion string   `json:"kubernetes_version"`
	ConfigPatches     []string `json:"config_patches"`
	Docs              bool     `json:"docs"`
	Examples          bool     `json:"examples"`
}

// Node is one talos_machine_configuration_apply: the data source feeding its machine_configuration_input and
// its own config_patches. MachineConfigurationInput, when given, replaces the generation step: it is what another
// machinery version generated (the provider's own, v1.13.0 for v0.11.0), to be applied and validated by this one.
type Node struct {
	Name                      string     `json:"name"`
	MachineConfiguration      DataSource `json:"machine_configuration"`
	MachineConfigurationInput *string    `json:"machine_configuration_input,omitempty"`
	ConfigPatches             []string   `json:"config_patches"`
}

// Input is the whole request.
type Input struct {
	Nodes []Node `json:"nodes"`
}

// Result is the verdict for one node.
type Result struct {
	Name      string   `json:"name"`
	OK        bool     `json:"ok"`
	Errors    []string `json:"errors"`
	Warnings  []string `json:"warnings"`
	Documents []string `json:"documents"`
	// Hostname is the static hostname the node ends up with (machine.network.hostname or a HostnameConfig's
	// hostname), HostnameAuto a HostnameConfig's `auto` (a generated hostname: the node would change identity).
	Hostname     string `json:"hostname"`
	HostnameAuto string `json:"hostname_auto"`
	// MachineConfigurationInput is the generated data source output, only with -emit-input (it holds the
	// secrets: read it from the pipe, never store it).
	MachineConfigurationInput *string `json:"machine_configuration_input,omitempty"`
}

// Output is the whole answer.
type Output struct {
	Machinery string   `json:"machinery"`
	Mode      string   `json:"mode"`
	Strict    bool     `json:"strict"`
	Results   []Result `json:"results"`
}

// runtimeMode is Talos' runtime mode as the validator sees it (the real type lives in Talos' internal packages).
type runtimeMode string

func (m runtimeMode) String() string        { return string(m) }
func (m runtimeMode) RequiresInstall() bool { return m == "metal" }
func (m runtimeMode) InContainer() bool     { return m == "container" }

func main() {
	mode := flag.String("mode", "metal", "runtime mode to validate for: metal (install required), cloud or container")
	strict := flag.Bool("strict", false, "count warnings as errors (talosctl validate --strict)")
	secretsFile := flag.String("secrets", "", "secrets bundle (talosctl gen secrets); default: generated in memory")
	emitInput := flag.Bool("emit-input", false, "add each node's generated machine_configuration (holds secrets) to its result")
	writeSecrets := flag.String("write-secrets", "", "generate a secrets bundle into this new file (0600) and exit")
	version := flag.Bool("version", false, "print the machinery version and exit")
	kubernetes := flag.String("kubernetes", "", "say whether this Kubernetes version runs on the tool's Talos (Talos' compatibility table) and exit")
	flag.Parse()

	if *version {
		fmt.Println(machineryVersion())

		return
	}

	if *kubernetes != "" {
		if err := checkKubernetes(os.Stdout, *kubernetes); err != nil {
			fmt.Fprintf(os.Stderr, "talos-validate: %v\n", err)
			os.Exit(2)
		}

		return
	}

	if *writeSecrets != "" {
		if err := writeSecretsBundle(*writeSecrets); err != nil {
			fmt.Fprintf(os.Stderr, "talos-validate: %v\n", err)
			os.Exit(2)
		}

		return
	}

	if err := run(os.Stdin, os.Stdout, options{runtimeMode(*mode), *strict, *emitInput}, *secretsFile); err != nil {
		fmt.Fprintf(os.Stderr, "talos-validate: %v\n", err)
		os.Exit(2)
	}
}

type options struct {
	mode      runtimeMode
	strict    bool
	emitInput bool
}

func run(in io.Reader, out io.Writer, opts options, secretsFile string) error {
	switch opts.mode {
	case "metal", "cloud", "container":
	default:
		return fmt.Errorf("unknown -mode %q: use metal, cloud or container", opts.mode)
	}

	var input Input

	decoder := json.NewDecoder(in)
	decoder.DisallowUnknownFields()

	if err := decoder.Decode(&input); err != nil {
		return fmt.Errorf("reading the request (JSON on standard input): %w", err)
	}

	bundleSecrets, err := loadSecrets(secretsFile)
	if err != nil {
		return err
	}

	output := Output{Machinery: machineryVersion(), Mode: string(opts.mode), Strict: opts.strict, Results: []Result{}}

	// Terraform reads each data source once per plan and feeds its output to every apply that refers to it.
	generated := map[string]generation{}

	for _, node := range input.Nodes {
		key, err := json.Marshal(node.MachineConfiguration)
		if err != nil {
			return err
		}

		if _, seen := generated[string(key)]; !seen && node.MachineConfigurationInput == nil {
			configuration, err := generateConfiguration(node.MachineConfiguration, bundleSecrets)
			generated[string(key)] = generation{configuration, err}
		}

		output.Results = append(output.Results, check(node, generated[string(key)], opts))
	}

	encoded := json.NewEncoder(out)
	encoded.SetIndent("", "  ")

	return encoded.Encode(output)
}

func loadSecrets(path string) (*secrets.Bundle, error) {
	if path != "" {
		loaded, err := secrets.LoadBundle(path)
		if err != nil {
			return nil, fmt.Errorf("reading the secrets bundle %s: %w", path, err)
		}

		return loaded, nil
	}

	contract, err := config.ParseContractFromVersion(providerSecretsContract)
	if err != nil {
		return nil, err
	}

	generated, err := secrets.NewBundle(secrets.NewFixedClock(time.Now()), contract)
	if err != nil {
		return nil, fmt.Errorf("generating a secrets bundle: %w", err)
	}

	return generated, nil
}

// generation is one data source's output (or the error that stopped it).
type generation struct {
	configuration []byte
	err           error
}

func check(node Node, source generation, opts options) Result {
	result := Result{Name: node.Name, Errors: []string{}, Warnings: []string{}, Documents: []string{}}
	fail := func(stage string, err error) Result {
		for _, message := range flatten(err) {
			result.Errors = append(result.Errors, stage+": "+message)
		}

		return result
	}

	generated := source.configuration

	if node.MachineConfigurationInput != nil {
		generated = []byte(*node.MachineConfigurationInput)
	} else {
		if source.err != nil {
			return fail("talos_machine_configuration", source.err)
		}

		if opts.emitInput {
			text := string(generated)
			result.MachineConfigurationInput = &text
		}
	}

	applied, err := applyPatches(generated, node.ConfigPatches)
	if err != nil {
		return fail("talos_machine_configuration_apply", err)
	}

	provider, err := configloader.NewFromBytes(applied)
	if err != nil {
		return fail("load", err)
	}

	for _, document := range provider.Documents() {
		result.Documents = append(result.Documents, document.Kind())
	}

	result.Hostname, result.HostnameAuto, err = hostnames(applied)
	if err != nil {
		return fail("load", err)
	}

	validationOptions := []validation.Option{validation.WithLocal()}
	if opts.strict {
		validationOptions = append(validationOptions, validation.WithStrict())
	}

	warnings, err := provider.Validate(opts.mode, validationOptions...)
	result.Warnings = append(result.Warnings, warnings...)

	if err != nil {
		return fail("validate", err)
	}

	result.OK = true

	return result
}

// Compatibility is Talos' verdict on one Kubernetes version for the tool's own Talos version.
type Compatibility struct {
	Talos      string `json:"talos"`
	Kubernetes string `json:"kubernetes"`
	Supported  bool   `json:"supported"`
	Reason     string `json:"reason"`
}

// checkKubernetes asks Talos' compatibility table (what a node and `talosctl upgrade-k8s` enforce) whether the
// Kubernetes version runs on the Talos version this tool was built from.
func checkKubernetes(out io.Writer, kubernetesVersion string) error {
	talos, err := compatibility.ParseTalosVersion(&machineapi.VersionInfo{Tag: machineryVersion()})
	if err != nil {
		return fmt.Errorf("the tool's own Talos version: %w", err)
	}

	kubernetes, err := compatibility.ParseKubernetesVersion(kubernetesVersion)
	if err != nil {
		return fmt.Errorf("-kubernetes %q: %w", kubernetesVersion, err)
	}

	verdict := Compatibility{Talos: machineryVersion(), Kubernetes: kubernetes.String(), Supported: true}
	if err = kubernetes.SupportedWith(talos); err != nil {
		verdict.Supported, verdict.Reason = false, err.Error()
	}

	return json.NewEncoder(out).Encode(verdict)
}

// writeSecretsBundle writes a new bundle as `talosctl gen secrets` does (YAML, mode 0600), never over a file.
func writeSecretsBundle(path string) error {
	generated, err := loadSecrets("")
	if err != nil {
		return err
	}

	encoded, err := encoder.NewEncoder(generated, encoder.WithComments(encoder.CommentsDisabled)).Encode()
	if err != nil {
		return err
	}

	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing the secrets bundle: %w", err)
	}

	if _, err = file.Write(encoded); err != nil {
		file.Close() //nolint:errcheck

		return err
	}

	return file.Close()
}

// generateConfiguration follows the data source's Read: the provider's default generate options, the version
// contract from talos_version, the secrets as they come back out of Terraform state, the data source's patches
// applied to its role only.
func generateConfiguration(source DataSource, bundleSecrets *secrets.Bundle) ([]byte, error) {
	if err := checkEndpoint(source.ClusterEndpoint); err != nil {
		return nil, err
	}

	var machineType machine.Type

	switch source.MachineType {
	case "controlplane":
		machineType = machine.TypeControlPlane
	case "worker":
		machineType = machine.TypeWorker
	default:
		return nil, fmt.Errorf("machine_type %q is neither controlplane nor worker", source.MachineType)
	}

	contract, err := config.ParseContractFromVersion(source.TalosVersion)
	if err != nil {
		return nil, fmt.Errorf("talos_version: %w", err)
	}

	patches, err := configpatcher.LoadPatches(source.ConfigPatches)
	if err != nil {
		return nil, fmt.Errorf("config_patches are invalid: %w", err)
	}

	options := []bundle.Option{
		bundle.WithInputOptions(&bundle.InputOptions{
			ClusterName: source.ClusterName,
			Endpoint:    source.ClusterEndpoint,
			KubeVersion: strings.TrimPrefix(source.KubernetesVersion, "v"),
			GenOptions: []generate.Option{
				generate.WithClusterDiscovery(true),
				generate.WithDNSDomain(constants.DefaultDNSDomain),
				generate.WithInstallDisk("/dev/sda"),
				generate.WithInstallImage(fmt.Sprintf("ghcr.io/siderolabs/installer:%s", source.TalosVersion)),
				generate.WithSecretsBundle(throughState(bundleSecrets)),
				generate.WithVersionContract(contract),
			},
		}),
		bundle.WithVerbose(false),
	}

	if machineType == machine.TypeControlPlane {
		options = append(options, bundle.WithPatchControlPlane(patches))
	} else {
		options = append(options, bundle.WithPatchWorker(patches))
	}

	generated, err := bundle.NewBundle(options...)
	if err != nil {
		return nil, err
	}

	comments := encoder.CommentsDisabled
	if source.Docs {
		comments |= encoder.CommentsDocs
	}

	if source.Examples {
		comments |= encoder.CommentsExamples
	}

	return generated.Serialize(comments, machineType)
}

// throughState keeps what survives talos_machine_secrets' state and the data source's machine_secrets input:
// the data source builds a new bundle from those fields with a clock fixed at read time.
func throughState(in *secrets.Bundle) *secrets.Bundle {
	out := &secrets.Bundle{
		Clock:      secrets.NewFixedClock(time.Now()),
		Cluster:    &secrets.Cluster{ID: in.Cluster.ID, Secret: in.Cluster.Secret},
		TrustdInfo: &secrets.TrustdInfo{Token: in.TrustdInfo.Token},
		Secrets: &secrets.Secrets{
			BootstrapToken:            in.Secrets.BootstrapToken,
			SecretboxEncryptionSecret: in.Secrets.SecretboxEncryptionSecret,
			AESCBCEncryptionSecret:    in.Secrets.AESCBCEncryptionSecret,
		},
		Certs: &secrets.Certs{
			Etcd:              in.Certs.Etcd,
			K8s:               in.Certs.K8s,
			K8sAggregator:     in.Certs.K8sAggregator,
			K8sServiceAccount: in.Certs.K8sServiceAccount,
			OS:                in.Certs.OS,
		},
	}

	return out
}

// checkEndpoint refuses what the data source's configuration validation refuses: an endpoint that is not an
// https URL with a host.
func checkEndpoint(endpoint string) error {
	parsed, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("cluster_endpoint %q: %w", endpoint, err)
	}

	if parsed.Scheme != "https" || parsed.Host == "" {
		return fmt.Errorf("cluster_endpoint %q is invalid: the control plane endpoint must be an https:// URL", endpoint)
	}

	return nil
}

// applyPatches is the apply resource's computation: patches loaded like the provider loads them, applied over
// the data source's output bytes.
func applyPatches(input []byte, patchTexts []string) ([]byte, error) {
	patches, err := configpatcher.LoadPatches(patchTexts)
	if err != nil {
		return nil, fmt.Errorf("error loading config patches: %w", err)
	}

	patched, err := configpatcher.Apply(configpatcher.WithBytes(input), patches)
	if err != nil {
		return nil, fmt.Errorf("error applying config patches: %w", err)
	}

	return patched.Bytes()
}

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// hostnames reads the hostname settings out of the final documents, whichever contract wrote them.
func hostnames(configuration []byte) (static, auto string, err error) {
	for _, text := range documentSeparator.Split(string(configuration), -1) {
		var document struct {
			Kind     string `json:"kind"`
			Hostname string `json:"hostname"`
			Auto     string `json:"auto"`
			Machine  struct {
				Network struct {
					Hostname string `json:"hostname"`
				} `json:"network"`
			} `json:"machine"`
		}

		asJSON, err := yaml.YAMLToJSON([]byte(text))
		if err != nil {
			return "", "", err
		}

		if err = json.Unmarshal(asJSON, &document); err != nil {
			return "", "", err
		}

		switch {
		case document.Kind == "HostnameConfig":
			if document.Hostname != "" {
				static = document.Hostname
			}

			auto = document.Auto
		case document.Machine.Network.Hostname != "":
			static = document.Machine.Network.Hostname
		}
	}

	return static, auto, nil
}

// flatten turns Talos' (nested, prefixed) multierrors into one message per problem.
func flatten(err error) []string {
	if err == nil {
		return nil
	}

	var multi *multierror.Error
	if errors.As(err, &multi) {
		prefix := ""
		if text, inner := err.Error(), multi.Error(); text != inner && strings.HasSuffix(text, inner) {
			prefix = strings.TrimSuffix(text, inner)
		}

		var messages []string

		for _, wrapped := range multi.WrappedErrors() {
			for _, message := range flatten(wrapped) {
				messages = append(messages, prefix+message)
			}
		}

		return messages
	}

	return []string{strings.TrimSpace(err.Error())}
}

func machineryVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}

	for _, dependency := range info.Deps {
		if dependency.Path == machineryModule {
			return dependency.Version
		}
	}

	return "unknown"
}
