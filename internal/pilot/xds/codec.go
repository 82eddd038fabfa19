package xds

import (
	"hash/crc64"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
	"weak"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Why a codec. A generator hands the same encoded Body to every proxy of a
// Sidecar scope, but gRPC's proto codec marshals each response into one new
// buffer, so N proxies receiving their config at once hold N copies of it
// until their streams drain, and peak memory grows with proxies × config size.
// gRPC's CodecV2 lets Marshal return a list of buffers instead, which the
// transport writes out without joining them. Protobuf allows a message's fields
// in any order and a repeated field's entries anywhere, so a response can be
// sent as [fields before resources][one entry per resource][fields after]:
// the outer pieces are encoded per send (versions and nonces differ per
// proxy); each entry's framing is encoded once per Body and shared by every
// send, and its payload is the Body's own Value, never copied. The pieces are
// laid out in field-number order, as proto.Marshal lays them out, so the bytes
// on the wire are exactly those the proto codec would have sent.
//
// What is left per send is a 16-byte slot per buffer, so 32 bytes per
// resource (64 on delta streams), and the small outer pieces.

// resourcesField is the field number of DiscoveryResponse.resources,
// DeltaDiscoveryResponse.resources and (as it happens) Resource.resource.
const resourcesField protowire.Number = 2

// ServerOption returns the option that makes a grpc.Server send this server's
// responses with shared resource bytes; build the grpc.Server that Register
// serves on with it. Without it the server works the same, but every send
// copies its resources.
//
// grpc.ForceServerCodecV2 applies to every service on the grpc.Server, so the
// codec it installs handles only DiscoveryResponse and DeltaDiscoveryResponse
// itself and hands every other message, both ways, to gRPC's standard proto
// codec. The one visible difference for other services is that a client's
// content-subtype (application/grpc+json, say) no longer picks another
// registered codec: everything is protobuf.
func (s *Server) ServerOption() grpc.ServerOption {
	return grpc.ForceServerCodecV2(newSharedCodec(s.cache))
}

// sharedCodec is the CodecV2 ServerOption installs.
type sharedCodec struct {
	cache *resourceCache
	proto encoding.CodecV2
}

var _ encoding.CodecV2 = (*sharedCodec)(nil)

func newSharedCodec(cache *resourceCache) *sharedCodec {
	return &sharedCodec{cache: cache, proto: encoding.GetCodecV2(grpcproto.Name)}
}

// Name is the content-subtype the codec stands for: it speaks protobuf.
func (c *sharedCodec) Name() string { return grpcproto.Name }

// Unmarshal decodes requests, and anything else, as the proto codec does.
func (c *sharedCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// Marshal encodes discovery responses with shared resource buffers and
// anything else as the proto codec does. A response the shared layout cannot
// reproduce exactly (a nil entry, a resource that fails to encode) also goes
// to the proto codec, which then reports its error as usual.
func (c *sharedCodec) Marshal(v any) (mem.BufferSlice, error) {
	var out mem.BufferSlice
	switch m := v.(type) {
	case *discovery.DiscoveryResponse:
		out = c.marshalSotW(m)
	case *discovery.DeltaDiscoveryResponse:
		out = c.marshalDelta(m)
	}
	if out != nil {
		return out, nil
	}
	return c.proto.Marshal(v)
}

// marshalSotW lays out a state-of-the-world response, or returns nil to leave
// it to the proto codec.
func (c *sharedCodec) marshalSotW(resp *discovery.DiscoveryResponse) mem.BufferSlice {
	if len(resp.GetResources()) == 0 {
		return nil // nothing to share
	}
	head, tail, err := splitAround(resp.ProtoReflect(), resourcesField)
	if err != nil {
		return nil
	}
	out := make(mem.BufferSlice, 0, 2*len(resp.Resources)+2)
	out = appendBytes(out, head)
	for _, a := range resp.Resources {
		e := c.cache.entry(a)
		if e == nil || e.encode(a) != nil {
			return nil
		}
		out = e.appendField(out)
	}
	return appendBytes(out, tail)
}

// marshalDelta lays out a delta response, or returns nil to leave it to the
// proto codec. Each Resource entry is [tag, length, version][the shared Body
// field][name]; a Resource carrying anything else is encoded whole, per send.
func (c *sharedCodec) marshalDelta(resp *discovery.DeltaDiscoveryResponse) mem.BufferSlice {
	if len(resp.GetResources()) == 0 {
		return nil
	}
	head, tail, err := splitAround(resp.ProtoReflect(), resourcesField)
	if err != nil {
		return nil
	}
	out := make(mem.BufferSlice, 0, 4*len(resp.Resources)+2)
	out = appendBytes(out, head)
	for _, r := range resp.Resources {
		if r == nil {
			return nil
		}
		e := c.cache.entry(r.Resource)
		if e == nil || e.encode(r.Resource) != nil {
			return nil
		}
		w := e.deltaWrap(r)
		if w == nil {
			// Fields this layout does not know: encode this entry whole.
			b, err := proto.Marshal(r)
			if err != nil {
				return nil
			}
			b = append(protowire.AppendVarint(protowire.AppendTag(nil, resourcesField, protowire.BytesType), uint64(len(b))), b...)
			out = append(out, mem.SliceBuffer(b))
			continue
		}
		out = e.appendField(append(out, w.head))
		if w.tail != nil {
			out = append(out, w.tail)
		}
	}
	return appendBytes(out, tail)
}

// splitAround encodes m's fields numbered below num and above num (with any
// unknown fields, which proto.Marshal also puts last) as two byte strings.
func splitAround(m protoreflect.Message, num protowire.Number) (head, tail []byte, err error) {
	before, after := m.New(), m.New()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Number() < num:
			before.Set(fd, v)
		case fd.Number() > num:
			after.Set(fd, v)
		}
		return true
	})
	if u := m.GetUnknown(); len(u) > 0 {
		after.SetUnknown(u)
	}
	if head, err = proto.Marshal(before.Interface()); err != nil {
		return nil, nil, err
	}
	if tail, err = proto.Marshal(after.Interface()); err != nil {
		return nil, nil, err
	}
	return head, tail, nil
}

func appendBytes(out mem.BufferSlice, b []byte) mem.BufferSlice {
	if len(b) == 0 {
		return out
	}
	return append(out, mem.SliceBuffer(b))
}

// resourceCache holds each Body's shared encodings. It is keyed by the Body's
// address, because generators share Bodies by pointer and the server promises
// never to re-encode them, and holds Bodies only weakly, so that an entry goes
// when its Body does: each Body's framing is encoded once however many proxies
// are sent it, and the cache never keeps an old snapshot's Bodies alive.
//
// Every send looks up every resource it carries, so lookups must be cheap:
// weak.Make on each one measured 2 µs (it walks the object's span's special
// records), hence plain addresses as keys, checked against the entry's weak
// pointer, which tells a live Body from a later one at the same address.
type resourceCache struct {
	shards [cacheShards]cacheShard
	// size counts entries, for tests and debugging.
	size atomic.Int64
}

const cacheShards = 64

type cacheShard struct {
	mu sync.RWMutex
	m  map[uintptr]*sharedAny
}

// entry returns body's entry, making an empty one if it has none; nil for a
// nil body.
func (c *resourceCache) entry(body *anypb.Any) *sharedAny {
	if body == nil {
		return nil
	}
	addr := uintptr(unsafe.Pointer(body))
	sh := &c.shards[(addr>>4)%cacheShards]
	sh.mu.RLock()
	e := sh.m[addr]
	sh.mu.RUnlock()
	if e != nil && e.body.Value() == body {
		return e
	}
	wp := weak.Make(body)
	sh.mu.Lock()
	if e = sh.m[addr]; e != nil && e.body == wp {
		sh.mu.Unlock()
		return e // another send made it meanwhile
	}
	if sh.m == nil {
		sh.m = make(map[uintptr]*sharedAny)
	}
	if e == nil {
		c.size.Add(1)
	} // else: the entry of a collected Body whose cleanup has not run yet
	e = &sharedAny{body: wp}
	sh.m[addr] = e
	sh.mu.Unlock()
	runtime.AddCleanup(body, func(e *sharedAny) {
		sh.mu.Lock()
		if sh.m[addr] == e { // not replaced by a later Body's
			delete(sh.m, addr)
			c.size.Add(-1)
		}
		sh.mu.Unlock()
	}, e)
	return e
}

// sharedAny is one Body's encodings, each made once, then only read: the
// buffers go to many streams at once and must never change or be pooled
// (mem.SliceBuffer's Ref and Free do nothing, so gRPC never recycles them).
type sharedAny struct {
	body weak.Pointer[anypb.Any] // whose entry this is
	once sync.Once
	// head and value are the Body as a length-delimited field 2: head is the
	// tag and length, then the Any's type_url field and its value field's tag
	// and length; value is the Body's own Value, not a copy. Together they are
	// the bytes proto.Marshal makes for a DiscoveryResponse.resources entry or
	// a delta Resource's resource field. value is nil when empty, or when the
	// Any has more than those two fields: head then holds all of it, copied.
	head, value mem.Buffer
	size        int // of head and value
	err         error

	versionOnce sync.Once
	version     string

	delta atomic.Pointer[deltaParts]
}

// encode makes the shared field on first use.
func (e *sharedAny) encode(body *anypb.Any) error {
	e.once.Do(func() {
		n := proto.Size(body)
		e.size = protowire.SizeTag(resourcesField) + protowire.SizeVarint(uint64(n)) + n
		head := protowire.AppendTag(nil, resourcesField, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(n))
		if v := body.GetValue(); utf8.ValidString(body.GetTypeUrl()) {
			head = appendStringField(head, 1, body.GetTypeUrl())
			if len(v) > 0 {
				head = protowire.AppendVarint(protowire.AppendTag(head, 2, protowire.BytesType), uint64(len(v)))
			}
			if len(head)+len(v) == e.size { // nothing else set, no unknown fields
				e.head = mem.SliceBuffer(head)
				if len(v) > 0 {
					e.value = mem.SliceBuffer(v)
				}
				return
			}
		}
		// Unknown fields, or a type URL proto.Marshal would reject: let it
		// encode (or reject) the whole Any.
		head = protowire.AppendVarint(protowire.AppendTag(make([]byte, 0, e.size), resourcesField, protowire.BytesType), uint64(n))
		head, e.err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(head, body)
		e.head = mem.SliceBuffer(head)
	})
	return e.err
}

// appendField appends the shared field's buffers to out.
func (e *sharedAny) appendField(out mem.BufferSlice) mem.BufferSlice {
	out = append(out, e.head)
	if e.value != nil {
		out = append(out, e.value)
	}
	return out
}

// deltaParts are the bytes around the shared field in a delta Resource entry
// for one name and version.
type deltaParts struct {
	name, version string
	inner         int        // the entry's encoded size
	head          mem.Buffer // tag and length of the entry, then the version field
	tail          mem.Buffer // the name field; nil when the name is empty
}

// deltaWrap returns the pieces around e's shared field for r, reusing the last ones
// made when the name and version match (they do for every proxy given the same
// Body). It returns nil if r has fields besides name, version and resource.
func (e *sharedAny) deltaWrap(r *discovery.Resource) *deltaParts {
	// Any other field, set or unknown, would show in the size.
	size := proto.Size(r)
	if p := e.delta.Load(); p != nil && p.name == r.Name && p.version == r.Version {
		if size != p.inner {
			return nil
		}
		return p
	}
	inner := stringFieldSize(1, r.Version) + e.size + stringFieldSize(3, r.Name)
	if size != inner {
		return nil
	}
	head := protowire.AppendTag(nil, resourcesField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(inner))
	head = appendStringField(head, 1, r.Version)
	p := &deltaParts{name: r.Name, version: r.Version, inner: inner, head: mem.SliceBuffer(head)}
	if r.Name != "" {
		p.tail = mem.SliceBuffer(appendStringField(nil, 3, r.Name))
	}
	e.delta.Store(p)
	return p
}

// stringFieldSize is the encoded size of a proto3 string field (0 when empty).
func stringFieldSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// contentVersion derives a resource version from its encoded bytes, once per
// Body. It is stable across restarts, so a reconnecting proxy's
// initial_resource_versions still match what it has.
func (c *resourceCache) contentVersion(body *anypb.Any) string {
	e := c.entry(body)
	if e == nil {
		return strconv.FormatUint(crc64.Checksum(nil, crcTable), 16)
	}
	e.versionOnce.Do(func() {
		e.version = strconv.FormatUint(crc64.Checksum(body.GetValue(), crcTable), 16)
	})
	return e.version
}
