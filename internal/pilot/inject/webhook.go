package inject

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"istio.io/api/annotation"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// maxReviewBytes bounds an AdmissionReview's body: the API server sends a
// pod of at most its 3 MiB request limit, wrapped.
const maxReviewBytes = 4 << 20

// Webhook is the /inject handler.
type Webhook struct {
	opts    Options
	log     *slog.Logger
	metrics webhookMetrics
}

// webhookMetrics carry istiod's names for the same counts, so that Istio's
// dashboards read them.
type webhookMetrics struct {
	requests, success, skip, failure prometheus.Counter
}

// NewWebhook serves injection with opts; reg (when not nil) receives its
// metrics; log gets a line per pod that is not injected for a failure.
func NewWebhook(opts Options, log *slog.Logger, reg prometheus.Registerer) (*Webhook, error) {
	opts = opts.withDefaults()
	if opts.Tag == "" {
		return nil, errors.New("inject: no image tag")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := webhookMetrics{
		requests: counter("sidecar_injection_requests_total", "Total number of sidecar injection requests."),
		success:  counter("sidecar_injection_success_total", "Total number of successful sidecar injection requests."),
		skip:     counter("sidecar_injection_skip_total", "Total number of skipped sidecar injection requests."),
		failure:  counter("sidecar_injection_failure_total", "Total number of failed sidecar injection requests (the pod admitted without a sidecar)."),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.success, m.skip, m.failure} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("inject: metrics: %w", err)
			}
		}
	}
	return &Webhook{opts: opts, log: log, metrics: m}, nil
}

// ServeHTTP answers an AdmissionReview v1 with one. A request that is not
// an AdmissionReview gets 400; any pod gets a review that admits it.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(rw, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		http.Error(rw, fmt.Sprintf("content type %q: want application/json", ct), http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err == nil && len(body) > maxReviewBytes {
		err = fmt.Errorf("more than %d bytes", maxReviewBytes)
	}
	var review admissionv1.AdmissionReview
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err == nil && review.Request == nil {
		err = errors.New("no request in the AdmissionReview")
	}
	if err != nil {
		http.Error(rw, "read AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.metrics.requests.Inc()
	resp := w.Review(review.Request)
	resp.UID = review.Request.UID
	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(out)
}

// Review decides one admission request. It always admits: a pod it
// cannot give a sidecar is admitted without one, with a warning the client
// sees, a log line and sidecar_injection_failure_total, so that a bug or an
// unsupported annotation never blocks a workload (the lab's checks then
// report the mode as not met). istiod instead refuses such a pod; meshperf
// fails open on purpose (docs/kubernetes.md).
func (w *Webhook) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create {
		w.metrics.skip.Inc()
		return allowed
	}
	// Case-sensitive, as the API server decodes: a patch is written for
	// the members the pod has, by their exact names.
	var p corev1.Pod
	if err := kjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &p); err != nil {
		return w.failed(allowed, req, fmt.Errorf("%w: decode the pod: %v", ErrCannotInject, err))
	}
	if p.Namespace == "" { // a pod of a Deployment has neither name nor namespace yet
		p.Namespace = req.Namespace
	}
	if ok, why := Required(&p); !ok {
		w.log.Debug("not injected", "pod", podName(req, &p), "reason", why)
		w.metrics.skip.Inc()
		return allowed
	}
	if len(p.Spec.Containers) == 0 { // invalid, and a patch appending to them would not apply
		return w.failed(allowed, req, fmt.Errorf("%w: the pod has no containers", ErrCannotInject))
	}
	inj, err := w.opts.Sidecar(&p)
	if err != nil {
		return w.failed(allowed, req, err)
	}
	patch, err := json.Marshal(inj.patch(&p, hasMember(req.Object.Raw, "metadata")))
	if err != nil {
		return w.failed(allowed, req, err)
	}
	w.metrics.success.Inc()
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

func (w *Webhook) failed(allowed *admissionv1.AdmissionResponse, req *admissionv1.AdmissionRequest, err error) *admissionv1.AdmissionResponse {
	w.metrics.failure.Inc()
	w.log.Warn("pod admitted without a sidecar", "pod", podName(req, nil), "error", err)
	allowed.Warnings = []string{"meshperf: no sidecar injected: " + err.Error()}
	return allowed
}

func podName(req *admissionv1.AdmissionRequest, p *corev1.Pod) string {
	name := req.Name
	if name == "" && p != nil {
		name = p.GenerateName + "*"
	}
	return req.Namespace + "/" + name
}

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// patch adds the injection to p: the capture first among the init
// containers (before any of the pod's own, whose traffic it must already
// see), the proxy after the pod's containers, the token and root volumes and the
// status annotation.
func (inj *Injection) patch(p *corev1.Pod, hasMetadata bool) []patchOp {
	var ops []patchOp
	if len(p.Spec.InitContainers) == 0 {
		ops = append(ops, patchOp{"add", "/spec/initContainers", []corev1.Container{inj.Init}})
	} else {
		ops = append(ops, patchOp{"add", "/spec/initContainers/0", inj.Init})
	}
	ops = append(ops, patchOp{"add", "/spec/containers/-", inj.Proxy})
	if len(p.Spec.Volumes) == 0 {
		ops = append(ops, patchOp{"add", "/spec/volumes", inj.Volumes})
	} else {
		for _, v := range inj.Volumes {
			ops = append(ops, patchOp{"add", "/spec/volumes/-", v})
		}
	}
	annotations := map[string]string{annotation.SidecarStatus.Name: inj.Status}
	if !hasMetadata {
		meta := map[string]any{"annotations": annotations}
		if len(inj.Labels) > 0 {
			meta["labels"] = inj.Labels
		}
		return append(ops, patchOp{"add", "/metadata", meta})
	}
	ops = append(ops, addMembers("/metadata/annotations", len(p.Annotations) == 0, annotations)...)
	return append(ops, addMembers("/metadata/labels", len(p.Labels) == 0, inj.Labels)...)
}

// addMembers adds members to the object at path: the whole object when
// it is absent or empty, else one member at a time, sorted so the patch
// is the same for the same pod.
func addMembers(path string, absent bool, members map[string]string) []patchOp {
	if len(members) == 0 {
		return nil
	}
	if absent {
		return []patchOp{{"add", path, members}}
	}
	var ops []patchOp
	for _, k := range slices.Sorted(maps.Keys(members)) {
		ops = append(ops, patchOp{"add", path + "/" + escapePointer(k), members[k]})
	}
	return ops
}

// hasMember says whether the JSON object raw has the member name, not null.
func hasMember(raw []byte, name string) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return false
	}
	v, ok := members[name]
	return ok && string(v) != "null"
}

// escapePointer escapes a JSON Pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
