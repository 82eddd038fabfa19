package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/ca"
)

// TokenRequest asks the control plane for a pod's token, as Kubernetes'
// TokenRequest asks the API server: the service account it names, the
// pod it is bound to and that pod's node (both optional), and its lifetime
// in seconds (0: an hour).
type TokenRequest struct {
	Namespace         string `json:"namespace"`
	ServiceAccount    string `json:"serviceAccount"`
	Pod               string `json:"pod,omitempty"`
	Node              string `json:"node,omitempty"`
	ExpirationSeconds int64  `json:"expirationSeconds,omitempty"`
}

// TokenResponse is an issued token and when it expires.
type TokenResponse struct {
	Token               string    `json:"token"`
	ExpirationTimestamp time.Time `json:"expirationTimestamp"`
}

// maxTokenRequestBytes bounds a token request's body: its five fields are
// names of at most 253 characters.
const maxTokenRequestBytes = 4 << 10

// issueToken answers POST /api/v1/tokens.
func (h *handler) issueToken(w http.ResponseWriter, r *http.Request) {
	if h.d.Tokens == nil {
		writeError(w, http.StatusConflict, "this control plane issues no tokens: on Kubernetes the kubelet projects each pod's "+
			"service-account token (audience "+ca.TokenAudience+"), which the CA and xDS accept")
		return
	}
	var req TokenRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTokenRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "token request: want one JSON object with namespace, serviceAccount, pod, node and expirationSeconds: "+err.Error())
		return
	}
	if req.ExpirationSeconds < 0 || req.ExpirationSeconds > int64(ca.MaxTokenLifetime/time.Second) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("token request: expirationSeconds %d is not between %d and %d",
			req.ExpirationSeconds, int64(ca.MinTokenLifetime/time.Second), int64(ca.MaxTokenLifetime/time.Second)))
		return
	}
	token, exp, err := h.d.Tokens.Issue(ca.TokenRequest{
		Identity: ca.Identity{Namespace: req.Namespace, ServiceAccount: req.ServiceAccount},
		Pod:      req.Pod, Node: req.Node, Lifetime: time.Duration(req.ExpirationSeconds) * time.Second,
	})
	switch {
	case errors.Is(err, ca.ErrInvalidTokenRequest):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		h.log.Error("token not issued", "error", err)
		writeError(w, http.StatusInternalServerError, "token not issued: "+err.Error())
		return
	}
	// Who got which identity, for an operator tracing a proxy's identity
	// back; never the token itself.
	h.log.Info("token issued", "namespace", req.Namespace, "serviceAccount", req.ServiceAccount, "pod", req.Pod,
		"node", req.Node, "expires", exp)
	writeJSON(w, http.StatusCreated, TokenResponse{Token: token, ExpirationTimestamp: exp.UTC()})
}

// IssueToken asks the control plane for a pod's token (POST
// /api/v1/tokens), which the proxy then sends to the CA and on xDS to
// prove who it is.
func (c *Client) IssueToken(ctx context.Context, req TokenRequest) (*TokenResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp TokenResponse
	if err := c.send(ctx, http.MethodPost, "/api/v1/tokens", nil, bytes.NewReader(body), "application/json", &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
