package loadgen

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Responses are timed by when the kernel received them, not by when the event
// loop woke up to read them. A thread asleep in epoll_wait takes tens of
// microseconds to wake on a virtual machine; Go's scheduler hides part of that by
// spinning (at a CPU cost), the loop does not spin, so without kernel timestamps
// it would add its own wake-up to every latency. With SO_TIMESTAMPNS each read
// carries the time the last segment reached the socket.

// rxStampSpace is room for one SCM_TIMESTAMPNS control message.
var rxStampSpace = unix.CmsgSpace(16)

// enableRxTimestamps asks the kernel to stamp received data on fd.
func enableRxTimestamps(fd int) {
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
}

// rxTimestamp finds the receive time (wall clock, ns) in recvmsg's control data.
// Parsed by hand: unix.ParseSocketControlMessage allocates on every read.
func rxTimestamp(oob []byte) (wallNs int64, ok bool) {
	const header = unix.SizeofCmsghdr
	for len(oob) >= header {
		length := int(binary.NativeEndian.Uint64(oob[0:8]))
		level := int32(binary.NativeEndian.Uint32(oob[8:12]))
		typ := int32(binary.NativeEndian.Uint32(oob[12:16]))
		if length < header || length > len(oob) {
			return 0, false
		}
		if level == unix.SOL_SOCKET && typ == unix.SCM_TIMESTAMPNS && length >= header+16 {
			sec := int64(binary.NativeEndian.Uint64(oob[header : header+8]))
			nsec := int64(binary.NativeEndian.Uint64(oob[header+8 : header+16]))
			return sec*1_000_000_000 + nsec, true
		}
		oob = oob[min(unix.CmsgSpace(length-header), len(oob)):]
	}
	return 0, false
}
