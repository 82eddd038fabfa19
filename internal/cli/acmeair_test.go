package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/meshperf/meshperf/internal/acmeair"
	"github.com/meshperf/meshperf/internal/results"
)

// TestAcmeairServeAndDriveOverHostsNames runs the five services and the
// driver as the lab does, by name through a hosts file, on loopback.
func TestAcmeairServeAndDriveOverHostsNames(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "jwt.key")
	hostsFile := filepath.Join(dir, "hosts")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hostsFile, []byte("127.0.0.1 "+strings.Join(acmeair.Services, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	urls := map[string]string{}
	serve := func(service string, extra ...string) {
		ready := filepath.Join(dir, service+".ready")
		args := append([]string{"-service", service, "-port", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "data"),
			"-jwt-key-file", key, "-hosts", hostsFile, "-customers", "300", "-ready-file", ready}, extra...)
		var stdout, stderr syncBuffer
		wg.Go(func() {
			if code := runAcmeairServe(ctx, args, &stdout, &stderr); code != exitOK {
				t.Errorf("serve %s: exit %d: %s", service, code, stderr.String())
			}
		})
		r := waitReadyFile(t, ready)
		_, port, _ := strings.Cut(r.Listeners["http"], ":")
		urls[service] = fmt.Sprintf("http://%s:%s", service, port)
	}
	serve(acmeair.ServiceCustomer)
	serve(acmeair.ServiceFlight)
	serve(acmeair.ServiceAuth, "-customer-url", urls[acmeair.ServiceCustomer])
	serve(acmeair.ServiceBooking, "-customer-url", urls[acmeair.ServiceCustomer], "-flight-url", urls[acmeair.ServiceFlight])

	out := filepath.Join(dir, "acmeair.json")
	var stdout, stderr syncBuffer
	code := runAcmeairDrive(ctx, []string{"-users", "4", "-user-ids", "50", "-duration", "2s", "-hosts", hostsFile,
		"-auth", urls[acmeair.ServiceAuth], "-customer", urls[acmeair.ServiceCustomer],
		"-flight", urls[acmeair.ServiceFlight], "-booking", urls[acmeair.ServiceBooking], "-json", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("drive: exit %d: %s", code, stderr.String())
	}
	for _, tx := range []string{acmeair.TxLogin, acmeair.TxQueryFlight, acmeair.TxListBookings, "4 users for"} {
		if !strings.Contains(stdout.String(), tx) {
			t.Errorf("the table has no %q:\n%s", tx, stdout.String())
		}
	}
	run, err := results.ReadFortioFile(out)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	txs, err := acmeair.ReadTransactions(data)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, tx := range txs {
		sum += tx.Count
	}
	if run.Calls == 0 || run.Errors != 0 || run.Connections != 4 || sum != run.Calls {
		t.Errorf("result: %d calls, %d errors, %d users; transactions add up to %d", run.Calls, run.Errors, run.Connections, sum)
	}
	cancel()
	wg.Wait()
	for _, s := range []string{acmeair.ServiceCustomer, acmeair.ServiceBooking} {
		if _, err := os.Stat(filepath.Join(dir, s+".ready")); !os.IsNotExist(err) {
			t.Errorf("%s's ready file outlived it: %v", s, err)
		}
	}
}
