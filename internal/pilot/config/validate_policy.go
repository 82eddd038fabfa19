package config

import (
	"maps"
	"math"
	"slices"
	"strconv"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
)

// validateDestinationRule follows Istio's rules for the host, subsets and
// traffic policies.
func validateDestinationRule(r *Resource, errs *fieldErrors) bool {
	dr, ok := r.Spec.(*networking.DestinationRule)
	if !ok {
		return false
	}
	if dr.Host == "" {
		errs.add("spec.host", "required")
	} else {
		checkHost(errs, "spec.host", dr.Host)
	}
	checkTrafficPolicy(errs, "spec.trafficPolicy", dr.TrafficPolicy)
	names := map[string]bool{}
	for i, s := range dr.Subsets {
		path := idx("spec.subsets", i)
		if s == nil {
			errs.add(path, "must not be null")
			continue
		}
		switch {
		case s.Name == "":
			errs.add(path+".name", "required")
		case !isKubeLabel(s.Name):
			errs.add(path+".name", "%q is not a valid subset name (a DNS-1123 label)", s.Name)
		case names[s.Name]:
			errs.add(path+".name", "duplicate subset name %q", s.Name)
		}
		names[s.Name] = true
		checkLabels(errs, path+".labels", s.Labels)
		checkTrafficPolicy(errs, path+".trafficPolicy", s.TrafficPolicy)
	}
	checkExportTo(errs, "spec.exportTo", r.Meta.Namespace, dr.ExportTo, false)
	if ws := dr.WorkloadSelector; ws != nil {
		checkSelector(errs, "spec.workloadSelector.matchLabels", ws.MatchLabels)
		for _, e := range dr.ExportTo {
			if e != "." && e != r.Meta.Namespace {
				errs.add("spec.exportTo", "a DestinationRule with a workloadSelector can only be exported to its own namespace")
				break
			}
		}
	}
	return true
}

func checkTrafficPolicy(errs *fieldErrors, path string, tp *networking.TrafficPolicy) {
	if tp == nil {
		return
	}
	if tp.OutlierDetection == nil && tp.ConnectionPool == nil && tp.LoadBalancer == nil && tp.Tls == nil &&
		tp.PortLevelSettings == nil && tp.Tunnel == nil && tp.ProxyProtocol == nil && tp.RetryBudget == nil {
		errs.add(path, "at least one field is required")
		return
	}
	if tp.Tunnel != nil && tp.ProxyProtocol != nil {
		errs.add(path, "tunnel and proxyProtocol cannot both be set")
	}
	checkOutlier(errs, path+".outlierDetection", tp.OutlierDetection)
	checkConnectionPool(errs, path+".connectionPool", tp.ConnectionPool)
	checkLoadBalancer(errs, path+".loadBalancer", tp.LoadBalancer)
	checkClientTLS(errs, path+".tls", tp.Tls)
	for i, pl := range tp.PortLevelSettings {
		p := idx(path+".portLevelSettings", i)
		if pl == nil {
			errs.add(p, "must not be null")
			continue
		}
		if pl.Port == nil {
			errs.add(p+".port", "required")
		} else {
			checkPort(errs, p+".port.number", int64(pl.Port.Number))
		}
		if pl.OutlierDetection == nil && pl.ConnectionPool == nil && pl.LoadBalancer == nil && pl.Tls == nil {
			errs.add(p, "at least one of outlierDetection, connectionPool, loadBalancer or tls is required")
		}
		checkOutlier(errs, p+".outlierDetection", pl.OutlierDetection)
		checkConnectionPool(errs, p+".connectionPool", pl.ConnectionPool)
		checkLoadBalancer(errs, p+".loadBalancer", pl.LoadBalancer)
		checkClientTLS(errs, p+".tls", pl.Tls)
	}
	if t := tp.Tunnel; t != nil {
		if t.Protocol != "" && t.Protocol != "CONNECT" && t.Protocol != "POST" {
			errs.add(path+".tunnel.protocol", "%q: want CONNECT or POST", t.Protocol)
		}
		if !isIP(t.TargetHost) && hostProblem(t.TargetHost, false) != "" {
			errs.add(path+".tunnel.targetHost", "%q is neither an IP address nor a host name", t.TargetHost)
		}
		checkPort(errs, path+".tunnel.targetPort", int64(t.TargetPort))
	}
	if pp := tp.ProxyProtocol; pp != nil && pp.Version != 0 && pp.Version != 1 {
		errs.add(path+".proxyProtocol.version", "unsupported value %d", pp.Version)
	}
}

func checkOutlier(errs *fieldErrors, path string, o *networking.OutlierDetection) {
	if o == nil {
		return
	}
	checkDuration(errs, path+".baseEjectionTime", o.BaseEjectionTime)
	checkDuration(errs, path+".interval", o.Interval)
	if !o.SplitExternalLocalOriginErrors && o.ConsecutiveLocalOriginFailures.GetValue() > 0 {
		errs.add(path+".consecutiveLocalOriginFailures", "needs splitExternalLocalOriginErrors: true")
	}
	if o.MaxEjectionPercent < 0 || o.MaxEjectionPercent > 100 {
		errs.add(path+".maxEjectionPercent", "%d is not in the range 0-100", o.MaxEjectionPercent)
	}
	if o.MinHealthPercent < 0 || o.MinHealthPercent > 100 {
		errs.add(path+".minHealthPercent", "%d is not in the range 0-100", o.MinHealthPercent)
	}
}

func checkConnectionPool(errs *fieldErrors, path string, cp *networking.ConnectionPoolSettings) {
	if cp == nil {
		return
	}
	if cp.Http == nil && cp.Tcp == nil {
		errs.add(path, "one of http or tcp is required")
	}
	if h := cp.Http; h != nil {
		nonNegative := []struct {
			field string
			v     int32
		}{
			{"http1MaxPendingRequests", h.Http1MaxPendingRequests},
			{"http2MaxRequests", h.Http2MaxRequests},
			{"maxRequestsPerConnection", h.MaxRequestsPerConnection},
			{"maxRetries", h.MaxRetries},
			{"maxConcurrentStreams", h.MaxConcurrentStreams},
		}
		for _, f := range nonNegative {
			if f.v < 0 {
				errs.add(path+".http."+f.field, "%d is negative", f.v)
			}
		}
		checkDuration(errs, path+".http.idleTimeout", h.IdleTimeout)
		if h.H2UpgradePolicy == networking.ConnectionPoolSettings_HTTPSettings_UPGRADE && h.UseClientProtocol {
			errs.add(path+".http.useClientProtocol", "cannot be true with h2UpgradePolicy UPGRADE")
		}
	}
	if t := cp.Tcp; t != nil {
		if t.MaxConnections < 0 {
			errs.add(path+".tcp.maxConnections", "%d is negative", t.MaxConnections)
		}
		checkDuration(errs, path+".tcp.connectTimeout", t.ConnectTimeout)
		checkDuration(errs, path+".tcp.maxConnectionDuration", t.MaxConnectionDuration)
		if t.IdleTimeout != nil && t.IdleTimeout.AsDuration() != 0 {
			checkDuration(errs, path+".tcp.idleTimeout", t.IdleTimeout) // 0 disables it
		}
		if ka := t.TcpKeepalive; ka != nil {
			checkDuration(errs, path+".tcp.tcpKeepalive.time", ka.Time)
			checkDuration(errs, path+".tcp.tcpKeepalive.interval", ka.Interval)
		}
	}
}

func checkLoadBalancer(errs *fieldErrors, path string, lb *networking.LoadBalancerSettings) {
	if lb == nil {
		return
	}
	if ch := lb.GetConsistentHash(); ch != nil {
		if c := ch.GetHttpCookie(); c != nil && c.Name == "" {
			errs.add(path+".consistentHash.httpCookie.name", "required")
		}
		//lint:ignore SA1019 the deprecated field conflicts with its replacement
		if ch.MinimumRingSize != 0 && ch.HashAlgorithm != nil {
			errs.add(path+".consistentHash", "only one of minimumRingSize and maglev or ringHash may be set")
		}
		if m := ch.GetMaglev(); m != nil && (m.TableSize == 0 || m.TableSize >= 5000011 || !isPrime(m.TableSize)) {
			errs.add(path+".consistentHash.maglev.tableSize", "%d must be a prime below 5000011", m.TableSize)
		}
	}
	if lb.LocalityLbSetting != nil && lb.ZoneAwareLbSetting != nil {
		errs.add(path, "only one of localityLbSetting and zoneAwareLbSetting may be set")
	}
	if w := lb.Warmup; w != nil {
		if w.Duration == nil {
			errs.add(path+".warmup.duration", "required")
		}
		checkDuration(errs, path+".warmup.duration", w.Duration)
		if w.MinimumPercent.GetValue() > 100 {
			errs.add(path+".warmup.minimumPercent", "more than 100")
		}
		if w.Aggression != nil && !(w.Aggression.GetValue() > 0) {
			errs.add(path+".warmup.aggression", "must be positive")
		}
	}
}

func checkClientTLS(errs *fieldErrors, path string, tls *networking.ClientTLSSettings) {
	if tls == nil {
		return
	}
	fromSecret := tls.CredentialName != "" &&
		(tls.Mode == networking.ClientTLSSettings_SIMPLE || tls.Mode == networking.ClientTLSSettings_MUTUAL)
	switch {
	case fromSecret:
		if tls.ClientCertificate != "" || tls.CaCertificates != "" || tls.PrivateKey != "" || tls.CaCrl != "" {
			errs.add(path, "certificate, key and CRL files cannot be set with credentialName")
		}
	case tls.Mode == networking.ClientTLSSettings_MUTUAL:
		if tls.ClientCertificate == "" {
			errs.add(path+".clientCertificate", "required for mode MUTUAL without credentialName")
		}
		if tls.PrivateKey == "" {
			errs.add(path+".privateKey", "required for mode MUTUAL without credentialName")
		}
	}
}

func isPrime(n uint64) bool {
	if n < 2 {
		return false
	}
	if n < 4 {
		return true
	}
	if n%2 == 0 {
		return false
	}
	for f := uint64(3); f <= uint64(math.Sqrt(float64(n))); f += 2 {
		if n%f == 0 {
			return false
		}
	}
	return true
}

// validatePeerAuthentication: port-level modes need a workload selector, and
// their keys are port numbers.
func validatePeerAuthentication(r *Resource, errs *fieldErrors) bool {
	pa, ok := r.Spec.(*security.PeerAuthentication)
	if !ok {
		return false
	}
	noSelector := pa.Selector == nil || len(pa.Selector.MatchLabels) == 0
	if noSelector && len(pa.PortLevelMtls) > 0 {
		errs.add("spec.portLevelMtls", "needs a selector with matchLabels (mesh- and namespace-wide policies cannot set port-level mTLS)")
	}
	if pa.PortLevelMtls != nil && len(pa.PortLevelMtls) == 0 {
		errs.add("spec.portLevelMtls", "must not be empty when set")
	}
	for _, port := range sortedPorts(pa.PortLevelMtls) {
		if !validPort(int64(port)) {
			errs.add(key("spec.portLevelMtls", uitoa(port)), "port %d is not in the range 1-65535", port)
		}
	}
	if pa.Selector != nil {
		checkSelector(errs, "spec.selector.matchLabels", pa.Selector.MatchLabels)
	}
	return true
}

func sortedPorts[V any](m map[uint32]V) []uint32 { return slices.Sorted(maps.Keys(m)) }

func uitoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
