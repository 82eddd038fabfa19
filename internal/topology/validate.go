package topology

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate checks the graph as a whole, after every field read well:
// service names (DNS-1123 labels, as they become hosts and pods), calls to
// defined services, no call cycles, at least one entrypoint. isotope's
// converter checks only the calls; a name or cycle it lets through fails
// later, in Kubernetes or as requests that never end.
func (t *Topology) Validate() error {
	if len(t.Services) == 0 {
		return errors.New("services: empty; a topology needs at least one service")
	}
	index := map[string]int{}
	for i, s := range t.Services {
		path := fmt.Sprintf("services[%d] (%s)", i, s.Name)
		// The name becomes a host name and a pod's, as in Kubernetes.
		if len(validation.IsDNS1123Label(s.Name)) > 0 {
			return fieldErr(path+".name", "%q is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters); it names hosts and pods", s.Name)
		}
		if j, dup := index[s.Name]; dup {
			return fieldErr(path+".name", "%q is already the name of services[%d]", s.Name, j)
		}
		index[s.Name] = i
	}
	if err := checkCalls(t.Defaults.Script, "defaults.script", index); err != nil {
		return err
	}
	for i, s := range t.Services {
		if err := checkCalls(s.Script, fmt.Sprintf("services[%d] (%s).script", i, s.Name), index); err != nil {
			return err
		}
	}
	if err := t.checkCycles(index); err != nil {
		return err
	}
	if len(t.Entrypoints()) == 0 {
		return errors.New("services: no service has isEntrypoint: true; meshperf sends its load to the entrypoint, so mark one")
	}
	return nil
}

func checkCalls(script Script, path string, index map[string]int) error {
	for i, st := range script {
		stepPath := fmt.Sprintf("%s[%d]", path, i)
		if st.Call != nil {
			if _, ok := index[st.Call.Service]; !ok {
				return fieldErr(stepPath+".call", "calls %q, which is not a service of this topology", st.Call.Service)
			}
		}
		if err := checkCalls(st.Concurrent, stepPath, index); err != nil {
			return err
		}
	}
	return nil
}

// checkCycles refuses a service that reaches itself through its calls: each
// of its requests would call on forever.
func (t *Topology) checkCycles(index map[string]int) error {
	const (
		unvisited = iota
		inProgress
		done
	)
	state := make([]int, len(t.Services))
	var stack []string
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case done:
			return nil
		case inProgress:
			start := 0
			for start < len(stack) && stack[start] != t.Services[i].Name {
				start++
			}
			cycle := append(append([]string{}, stack[start:]...), t.Services[i].Name)
			return fieldErr(fmt.Sprintf("services[%d] (%s).script", index[cycle[0]], cycle[0]),
				"a call cycle: %s; every request would call on forever", strings.Join(cycle, " -> "))
		}
		state[i] = inProgress
		stack = append(stack, t.Services[i].Name)
		for _, callee := range callees(t.Services[i].Script) {
			if err := visit(index[callee]); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		return nil
	}
	for i := range t.Services {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

// callees are the services a script calls, in order, concurrent ones included.
func callees(script Script) []string {
	var out []string
	for _, st := range script {
		if st.Call != nil {
			out = append(out, st.Call.Service)
		}
		out = append(out, callees(st.Concurrent)...)
	}
	return out
}

// ErrorEvery is how many requests the service answers per simulated
// failure: one request in every ErrorEvery fails with a 500 before the
// script runs; 0 means never. isotope fails one request in every
// 10000/floor(rate*10000), which this keeps for every rate of 0.01% or
// more; below 0.01% that floor is 0 and isotope divides by zero, so here it
// is round(1/rate) requests, the same rate read without the 1/10000 grid.
func (s Service) ErrorEvery() int64 {
	if !(s.ErrorRate > 0) {
		return 0
	}
	if steps := int64(s.ErrorRate * 10000); steps >= 1 {
		return 10000 / steps
	}
	every := math.Round(1 / s.ErrorRate)
	if every >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(every)
}
