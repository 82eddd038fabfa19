package pod

import (
	"fmt"
	"sync"
)

// podSet is the bookkeeping both kinds of network share: the pods in the
// order they were added, the counter that numbers their addresses, and
// whether the network is closed. Networks embed it.
type podSet struct {
	mu     sync.Mutex
	pods   []*Pod
	next   int // the number the next pod's address is made from
	closed bool
}

// list returns the pods so far.
func (s *podSet) list() []*Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Pod(nil), s.pods...)
}

// add makes and records the pod called name, unless the network (described
// by network, for errors) is closed or already has one by that name. build
// gets the counter and returns the pod and the counter's next value; an
// error from make records nothing.
func (s *podSet) add(name, network string, build func(next int) (*Pod, int, error)) (*Pod, error) {
	if err := checkPodName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("add pod %s: network %s is closed", name, network)
	}
	for _, p := range s.pods {
		if p.name == name {
			return nil, fmt.Errorf("add pod %s: a pod with that name exists", name)
		}
	}
	p, next, err := build(s.next)
	if err != nil {
		return nil, err
	}
	s.next = next
	s.pods = append(s.pods, p)
	return p, nil
}

// close marks the set closed and returns its pods; false if it already was.
func (s *podSet) close() ([]*Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.closed = true
	return s.pods, true
}
