package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// DefaultMeshConfig returns Istio's defaults (those of a standard install)
// for the mesh config fields that concern the control plane. The agent's
// defaultConfig (ProxyConfig) and extension providers are left empty: they
// configure the proxy agent, not what pilot generates.
func DefaultMeshConfig() *meshconfig.MeshConfig {
	return &meshconfig.MeshConfig{
		EnableTracing:            true,
		AccessLogEncoding:        meshconfig.MeshConfig_TEXT,
		ProtocolDetectionTimeout: durationpb.New(0),
		IngressService:           "istio-ingressgateway",
		IngressControllerMode:    meshconfig.MeshConfig_STRICT,
		IngressClass:             "istio",
		TrustDomain:              "cluster.local",
		TrustDomainAliases:       []string{},
		EnableAutoMtls:           wrapperspb.Bool(true),
		OutboundTrafficPolicy: &meshconfig.MeshConfig_OutboundTrafficPolicy{
			Mode: meshconfig.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY,
		},
		InboundTrafficPolicy: &meshconfig.MeshConfig_InboundTrafficPolicy{
			Mode: meshconfig.MeshConfig_InboundTrafficPolicy_PASSTHROUGH,
		},
		LocalityLbSetting:              &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)},
		RootNamespace:                  "istio-system",
		ProxyListenPort:                15001,
		ProxyInboundListenPort:         15006,
		ConnectTimeout:                 durationpb.New(10 * time.Second),
		DefaultServiceExportTo:         []string{"*"},
		DefaultVirtualServiceExportTo:  []string{"*"},
		DefaultDestinationRuleExportTo: []string{"*"},
		DnsRefreshRate:                 durationpb.New(60 * time.Second),
		EnablePrometheusMerge:          wrapperspb.Bool(true),
		DefaultProviders:               &meshconfig.MeshConfig_DefaultProviders{},
	}
}

// LoadMeshConfig reads a mesh config file (YAML or JSON, Istio's field
// names) over the defaults; "" returns the defaults. As in istiod, every
// field written in the file overrides the default, and nested messages merge
// field by field, so `outboundTrafficPolicy: {}` keeps ALLOW_ANY. Unknown
// fields are errors; the error is one line naming the file and the field.
func LoadMeshConfig(path string) (*meshconfig.MeshConfig, error) {
	if path == "" {
		return DefaultMeshConfig(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	mc, err := ParseMeshConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return mc, nil
}

// ParseMeshConfig is LoadMeshConfig on bytes.
func ParseMeshConfig(data []byte) (*meshconfig.MeshConfig, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, yamlError(err, 1)
	}
	mc := DefaultMeshConfig()
	if isNull(js) {
		return mc, nil
	}
	if firstByte(js) != '{' {
		return nil, fmt.Errorf("not a mapping of mesh config fields")
	}
	user := &meshconfig.MeshConfig{}
	if err := decodeProto(js, user, ""); err != nil {
		return nil, err
	}
	var present map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&present); err != nil {
		return nil, err
	}
	overlay(mc.ProtoReflect(), user.ProtoReflect(), present)
	if err := ValidateMeshConfig(mc); err != nil {
		return nil, err
	}
	return mc, nil
}

// overlay copies into dst the fields of src that the user wrote (the keys of
// present), merging nested messages the same way.
func overlay(dst, src protoreflect.Message, present map[string]any) {
	fields := dst.Descriptor().Fields()
	for k, v := range present {
		fd := fields.ByJSONName(k)
		if fd == nil {
			fd = fields.ByTextName(k)
		}
		if fd == nil {
			continue // decodeProto already rejected unknown fields
		}
		sub, isObj := v.(map[string]any)
		switch {
		case v == nil || !src.Has(fd):
			dst.Clear(fd)
		case isObj && fd.Message() != nil && !fd.IsMap() && !fd.IsList() && !isWellKnown(fd.Message()) && fd.ContainingOneof() == nil:
			overlay(dst.Mutable(fd).Message(), src.Get(fd).Message(), sub)
		default:
			dst.Set(fd, src.Get(fd))
		}
	}
}

// ValidateMeshConfig checks the fields the control plane uses: the root
// namespace, ports, and discoverySelectors as Kubernetes label selectors.
func ValidateMeshConfig(mc *meshconfig.MeshConfig) error {
	var errs fieldErrors
	if mc.RootNamespace != "" && !isKubeLabel(mc.RootNamespace) {
		errs.add("rootNamespace", "%q is not a namespace name", mc.RootNamespace)
	}
	if mc.TrustDomain != "" {
		if p := hostProblem(mc.TrustDomain, false); p != "" {
			errs.add("trustDomain", "%q: %s", mc.TrustDomain, p)
		}
	}
	checkPort(&errs, "proxyListenPort", int64(mc.ProxyListenPort))
	checkPort(&errs, "proxyInboundListenPort", int64(mc.ProxyInboundListenPort))
	checkDuration(&errs, "connectTimeout", mc.ConnectTimeout)
	for i, s := range mc.DiscoverySelectors {
		checkLabelSelector(&errs, idx("discoverySelectors", i), s)
	}
	return errs.err()
}

func checkLabelSelector(errs *fieldErrors, path string, s *meshconfig.LabelSelector) {
	if s == nil {
		return
	}
	checkLabels(errs, path+".matchLabels", s.MatchLabels)
	for i, e := range s.MatchExpressions {
		p := idx(path+".matchExpressions", i)
		if e == nil {
			errs.add(p, "must not be null")
			continue
		}
		if e.Key == "" {
			errs.add(p+".key", "required")
		}
		for _, msg := range validation.IsQualifiedName(e.Key) {
			if e.Key != "" {
				errs.add(p+".key", "%q: %s", e.Key, msg)
			}
		}
		switch e.Operator {
		case "In", "NotIn":
			if len(e.Values) == 0 {
				errs.add(p+".values", "required for operator %s", e.Operator)
			}
		case "Exists", "DoesNotExist":
			if len(e.Values) > 0 {
				errs.add(p+".values", "must be empty for operator %s", e.Operator)
			}
		default:
			errs.add(p+".operator", "%q: want In, NotIn, Exists or DoesNotExist", e.Operator)
		}
		for j, v := range e.Values {
			for _, msg := range validation.IsValidLabelValue(v) {
				errs.add(idx(p+".values", j), "%q: %s", v, msg)
			}
		}
	}
}
