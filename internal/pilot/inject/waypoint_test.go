package inject_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/meshperf/meshperf/internal/kube/crdmanifest"
	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/inject"
	"github.com/meshperf/meshperf/internal/pilot/inject/injecttest"
	pilotkube "github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/testutil"
)

// waypointGateway is a Gateway as `istioctl waypoint apply` writes it (and
// the lab on a cluster): class istio-waypoint, HBONE on 15008, no address.
func waypointGateway(ns, name, class string) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{config.WaypointForLabel: "service"}},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: []gatewayv1.Listener{{
			Name: "mesh", Port: config.WaypointListenerPort, Protocol: config.WaypointListenerProtocol,
		}}},
	}
}

// TestWaypointDeployerDeploysAGatewaysWaypoint runs the deployer as the
// pilot's service account, with the manifest's RBAC, on a real API server:
// a waypoint Gateway gets its ServiceAccount, Deployment and Service, owned
// by it, and its status says the Service's cluster IP and Programmed; a
// Gateway of another class gets nothing; a change that does not alter the
// status writes none.
func TestWaypointDeployerDeploysAGatewaysWaypoint(t *testing.T) {
	s := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := pilotkube.InstallManifest(ctx, s.RESTConfig(), crdmanifest.GatewayAPI, ""); err != nil {
		t.Fatal(err)
	}
	pilotNS := s.NewNamespace(t, nil)
	injecttest.ApplyManifest(t, s, pilotNS, inject.Options{Tag: "v0.1.0"})
	gwAsPilot, err := gatewayclient.NewForConfig(s.RESTConfigAs(pilotNS, inject.PilotName))
	if err != nil {
		t.Fatal(err)
	}
	opts := inject.Options{ImageRepo: "meshperf.local", Tag: "v0.1.0", PullPolicy: corev1.PullNever}
	deployer := inject.NewWaypointDeployer(s.ClientAs(t, pilotNS, inject.PilotName), gwAsPilot, opts, slog.New(slog.NewTextHandler(t.Output(), nil)))
	done := make(chan error, 1)
	go func() { done <- deployer.Run(ctx) }()

	admin := s.Client(t)
	gwAdmin, err := gatewayclient.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns := s.NewNamespace(t, nil)
	gws := gwAdmin.GatewayV1().Gateways(ns)
	created, err := gws.Create(ctx, waypointGateway(ns, "waypoint", config.WaypointGatewayClass), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gws.Create(ctx, waypointGateway(ns, "ingress", "istio"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var programmed *gatewayv1.Gateway
	testutil.Eventually(t, 30*time.Second, func() error {
		gw, err := gws.Get(ctx, "waypoint", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed)) || len(gw.Status.Addresses) != 1 {
			return fmt.Errorf("status %+v", gw.Status)
		}
		programmed = gw
		return nil
	})
	svc, err := admin.CoreV1().Services(ns).Get(ctx, "waypoint", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := programmed.Status.Addresses[0]; got.Value != svc.Spec.ClusterIP || *got.Type != gatewayv1.IPAddressType {
		t.Errorf("Gateway address %+v, want the Service's cluster IP %s", got, svc.Spec.ClusterIP)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != config.WaypointListenerPort || svc.Spec.Selector[config.GatewayNameLabel] != "waypoint" {
		t.Errorf("Service spec %+v, want HBONE's port selecting the waypoint's pods", svc.Spec)
	}
	dep, err := admin.AppsV1().Deployments(ns).Get(ctx, "waypoint", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template
	proxy := pod.Spec.Containers[0]
	switch {
	case pod.Spec.ServiceAccountName != "waypoint":
		t.Errorf("pods run as %q, want the Gateway's own account", pod.Spec.ServiceAccountName)
	case pod.Labels["istio.io/dataplane-mode"] != "none" || pod.Labels["sidecar.istio.io/inject"] != "false":
		t.Errorf("pod labels %v: want it kept out of capture and injection", pod.Labels)
	case !slices.Contains(proxy.Args, "waypoint") || !slices.Contains(proxy.Args, "--ca-address"):
		t.Errorf("proxy args %v, want a waypoint with its certificate from the CA", proxy.Args)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Get(ctx, "waypoint", metav1.GetOptions{}); err != nil {
		t.Errorf("service account: %v", err)
	}
	for _, owner := range [][]metav1.OwnerReference{dep.OwnerReferences, svc.OwnerReferences} {
		if len(owner) != 1 || owner[0].UID != created.UID || owner[0].Kind != "Gateway" {
			t.Errorf("owner references %+v, want the Gateway %s", owner, created.UID)
		}
	}
	if _, err := admin.AppsV1().Deployments(ns).Get(ctx, "ingress", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Gateway of class istio was deployed: %v", err)
	}

	// A label changes nothing the deployer writes: no status write follows
	// (one would come back as an event, and again, for ever).
	programmed.Labels["team"] = "shop"
	relabelled, err := gws.Update(ctx, programmed, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if gw, err := gws.Get(ctx, "waypoint", metav1.GetOptions{}); err != nil || gw.ResourceVersion != relabelled.ResourceVersion {
		t.Errorf("the Gateway was written after a label change (%v): resourceVersion %s, want %s", err, gw.ResourceVersion, relabelled.ResourceVersion)
	}

	// The Service deleted behind the deployer's back comes back at the next
	// event for its Gateway.
	if err := admin.CoreV1().Services(ns).Delete(ctx, "waypoint", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	relabelled.Labels["team"] = "cart"
	if _, err := gws.Update(ctx, relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		svc, err := admin.CoreV1().Services(ns).Get(ctx, "waypoint", metav1.GetOptions{})
		if err != nil {
			return err
		}
		gw, err := gws.Get(ctx, "waypoint", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if gw.Status.Addresses[0].Value != svc.Spec.ClusterIP {
			return errors.New("the Gateway's address is not the new Service's")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("deployer: %v", err)
	}
}
