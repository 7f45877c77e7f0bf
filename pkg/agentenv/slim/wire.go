package slim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"

	jsoniter "github.com/json-iterator/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/rancher"
)

// This file reads cluster objects off the wire straight into their slim
// form (slim.go), for the slim informers' lists and watches. The generic
// path decodes every object of a watch into a whole unstructured map (and
// scans its JSON four times: the frame, the event, the kind, the object),
// and the transform then copies, re-encodes and hashes it. At 10,000
// clusters that was over half of the controller's CPU during a global
// change, and every second of it is taken from the kube-apiserver when
// both share the cores (hack/bench -profile). Here one pass of a streaming
// JSON reader (json-iterator's Iterator) keeps the few fields the
// controller reads, hashes the rest for the fingerprint, and allocates
// nothing for what it skips.

var wireJSON = jsoniter.ConfigCompatibleWithStandardLibrary

// slimFromJSON reads one cluster object's JSON into its slim form (slim
// documents what is kept). Errors: the JSON is not an object of the shape
// the apiserver serves (metadata, labels and annotations objects of
// strings).
func slimFromJSON(data []byte) (*unstructured.Unstructured, error) {
	it := wireJSON.BorrowIterator(data)
	defer wireJSON.ReturnIterator(it)
	return slimFrom(it)
}

// fingerprintWriter feeds the fingerprint: each part of an object as a
// length-prefixed path and a length-prefixed value, so that no two
// different objects give the same stream.
type fingerprintWriter struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (f *fingerprintWriter) put(path, sub string, value []byte) {
	f.bytes([]byte(path))
	f.bytes([]byte(sub))
	f.bytes(value)
}

// putValue hashes the JSON value at it under path and sub, as its tokens:
// strings decoded, numbers as written, objects key by key in the order
// they come. So two encodings of one value that differ only in how a
// string is escaped (Go's encoding/json wrote \u0008 before Go 1.22, \b
// since; kube-apiservers are built with both) hash alike; the key order
// is the encoder's (sorted keys, encoding/json of an unstructured object).
func (f *fingerprintWriter) putValue(path, sub string, it *jsoniter.Iterator) {
	f.bytes([]byte(path))
	f.bytes([]byte(sub))
	f.value(it)
}

func (f *fingerprintWriter) tag(c byte) { f.h.Write([]byte{c}) }

func (f *fingerprintWriter) value(it *jsoniter.Iterator) {
	switch it.WhatIsNext() {
	case jsoniter.StringValue:
		f.tag('s')
		f.bytes([]byte(it.ReadString()))
	case jsoniter.NumberValue:
		f.tag('n')
		f.bytes([]byte(it.ReadNumber()))
	case jsoniter.NilValue:
		it.ReadNil()
		f.tag('z')
	case jsoniter.BoolValue:
		if it.ReadBool() {
			f.tag('t')
		} else {
			f.tag('f')
		}
	case jsoniter.ArrayValue:
		f.tag('[')
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool { f.value(it); return it.Error == nil })
		f.tag(']')
	case jsoniter.ObjectValue:
		f.tag('{')
		it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
			f.bytes([]byte(k))
			f.value(it)
			return it.Error == nil
		})
		f.tag('}')
	default:
		it.Skip() // not a JSON value: the iterator's error says so
	}
}

func (f *fingerprintWriter) bytes(b []byte) {
	n := binary.PutUvarint(f.buf[:], uint64(len(b)))
	f.h.Write(f.buf[:n])
	f.h.Write(b)
}

// slimFrom reads the object at it. The fingerprint (revert.go) covers
// every part but spec.agentEnvVars, status, metadata.resourceVersion,
// managedFields and generation, and the agentenv.RecordAnnotation and
// agentenv.StatusAnnotation annotations; parts are hashed by putValue, in the key
// order the apiserver encodes them: a custom resource is served by
// unstructuredJSONScheme.doEncode, json.NewEncoder(w).Encode(t.Object),
// whose pkg/util/json.NewEncoder is Go's encoding/json encoder, which
// sorts map keys (k8s.io/apimachinery
// v0.32.13, kube-apiserver 1.32.13's, pkg/apis/meta/v1/unstructured/
// helpers.go; the same in v0.28.15). Checked on the real apiserver by
// TestStreamedCacheIsTheLiveObjectsSlimCopy and the stream_break tests.
//
//nolint:funlen // one pass over the object, field by field: split, it would need a state object per call on the hot path (BenchmarkDecodeCluster)
func slimFrom(it *jsoniter.Iterator) (*unstructured.Unstructured, error) {
	if it.WhatIsNext() != jsoniter.ObjectValue {
		if it.Error != nil {
			return nil, it.Error
		}
		return nil, errors.New("cluster object: not a JSON object")
	}
	fp := &fingerprintWriter{h: sha256.New()}
	var (
		apiVersion, kind         string
		name, namespace, uid, rv string
		mgmtName                 string
		hasMgmtName              bool
		kept                     = map[string]string{}
		env                      []byte
		rke                      bool
		clusterName, driver      string
		provider                 string
		shapeErr                 error
	)
	readStringMap := func(it *jsoniter.Iterator, field string, each func(k, v string)) {
		if it.WhatIsNext() == jsoniter.NilValue {
			it.Skip()
			return
		}
		if it.WhatIsNext() != jsoniter.ObjectValue {
			shapeErr = fmt.Errorf("cluster object: %s is not an object", field)
			it.Skip()
			return
		}
		it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
			if it.WhatIsNext() != jsoniter.StringValue {
				shapeErr = fmt.Errorf("cluster object: %s[%q] is not a string", field, k)
				it.Skip()
				return true
			}
			each(k, it.ReadString())
			return true
		})
	}
	it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
		switch k {
		case "metadata":
			if it.WhatIsNext() != jsoniter.ObjectValue {
				shapeErr = errors.New("cluster object: metadata is not an object")
				it.Skip()
				return true
			}
			it.ReadObjectCB(func(it *jsoniter.Iterator, mk string) bool {
				switch mk {
				case "resourceVersion":
					rv = it.ReadString()
				case "managedFields", "generation":
					it.Skip()
				case "name", "namespace", "uid":
					if it.WhatIsNext() != jsoniter.StringValue {
						shapeErr = fmt.Errorf("cluster object: metadata.%s is not a string", mk)
						it.Skip()
						return true
					}
					s := it.ReadString()
					fp.put("metadata", mk, []byte(s))
					switch mk {
					case "name":
						name = s
					case "namespace":
						namespace = s
					default:
						uid = s
					}
				case "labels":
					readStringMap(it, "metadata.labels", func(lk, lv string) {
						fp.put("metadata.labels", lk, []byte(lv))
						if lk == rancher.ClusterNameLabel {
							mgmtName, hasMgmtName = lv, true
						}
						if lk == rancher.ProviderLabel {
							provider = lv
						}
					})
				case "annotations":
					readStringMap(it, "metadata.annotations", func(ak, av string) {
						if ak != agentenv.RecordAnnotation && ak != agentenv.StatusAnnotation && !rancher.IsPlanBookkeeping(ak) {
							fp.put("metadata.annotations", ak, []byte(av))
						}
						if strings.HasPrefix(ak, "leasetune.io/") || strings.HasPrefix(ak, "election.cattle.io/") ||
							ak == rancher.OperationsEnabledAnnotation || ak == rancher.AdministratedAnnotation {
							kept[interned.of(ak)] = interned.of(av)
						}
					})
				default:
					fp.putValue("metadata", mk, it)
				}
				return true
			})
		case "spec":
			if it.WhatIsNext() != jsoniter.ObjectValue {
				fp.putValue("", k, it)
				return true
			}
			it.ReadObjectCB(func(it *jsoniter.Iterator, sk string) bool {
				switch sk {
				case "agentEnvVars":
					if raw := it.SkipAndReturnBytes(); string(raw) != "null" {
						env = raw
					}
				default:
					if sk == "rkeConfig" {
						rke = it.WhatIsNext() != jsoniter.NilValue
					}
					fp.putValue("spec", sk, it)
				}
				return true
			})
		case "status":
			if it.WhatIsNext() != jsoniter.ObjectValue {
				it.Skip()
				return true
			}
			it.ReadObjectCB(func(it *jsoniter.Iterator, sk string) bool {
				if sk == "clusterName" && it.WhatIsNext() == jsoniter.StringValue {
					clusterName = it.ReadString()
				} else if sk == "driver" && it.WhatIsNext() == jsoniter.StringValue {
					// A management Cluster's driver (Rancher v2.15's
					// imported day-2 operations, rancher.ImportedDay2Ops);
					// hashed so that its change is not taken for a resync.
					driver = it.ReadString()
					fp.put("status", sk, []byte(driver))
				} else {
					it.Skip()
				}
				return true
			})
		case "apiVersion", "kind":
			if it.WhatIsNext() != jsoniter.StringValue {
				shapeErr = fmt.Errorf("cluster object: %s is not a string", k)
				it.Skip()
				return true
			}
			s := it.ReadString()
			fp.put("", k, []byte(s))
			if k == "kind" {
				kind = s
			} else {
				apiVersion = s
			}
		default:
			fp.putValue("", k, it)
		}
		return true
	})
	if it.Error != nil && !errors.Is(it.Error, io.EOF) {
		return nil, fmt.Errorf("cluster object: %w", it.Error)
	}
	if shapeErr != nil {
		return nil, shapeErr
	}
	out := &unstructured.Unstructured{Object: map[string]interface{}{}}
	out.SetAPIVersion(apiVersion)
	out.SetKind(kind)
	out.SetNamespace(namespace)
	out.SetName(name)
	out.SetUID(types.UID(uid))
	out.SetResourceVersion(rv)
	if hasMgmtName || provider != "" {
		labels := map[string]string{}
		if hasMgmtName {
			labels[rancher.ClusterNameLabel] = mgmtName
		}
		if provider != "" {
			labels[rancher.ProviderLabel] = interned.of(provider)
		}
		out.SetLabels(labels)
	}
	out.SetAnnotations(kept)
	out.Object[fingerprintKey] = hex.EncodeToString(fp.h.Sum(nil))
	spec := map[string]interface{}{}
	if env != nil {
		// As its JSON text: see slim.
		spec[agentenv.CompactEnvKey] = interned.of(string(env))
	}
	if rke {
		spec["rkeConfig"] = map[string]interface{}{}
	}
	if len(spec) > 0 {
		out.Object["spec"] = spec
	}
	if clusterName != "" || driver != "" {
		status := map[string]interface{}{}
		if clusterName != "" {
			status["clusterName"] = clusterName
		}
		if driver != "" {
			status["driver"] = interned.of(driver)
		}
		out.Object["status"] = status
	}
	return out, nil
}

// streamListWatch lists and watches the cluster kind gvr through rc (an
// unversioned REST client for /apis, NewRESTClient), decoding with
// slimFrom: lists in pages of listPage, each page decoded before the next
// is read; watches as a stream of events, one object at a time.
func streamListWatch(rc rest.Interface, gvr schema.GroupVersionResource) *cache.ListWatch {
	path := []string{"/apis", gvr.Group, gvr.Version, gvr.Resource}
	params := func(r *rest.Request, opts metav1.ListOptions) (*rest.Request, error) {
		q, err := metav1.ParameterCodec.EncodeParameters(&opts, metav1.SchemeGroupVersion)
		if err != nil {
			return nil, err
		}
		for k, vs := range q {
			for _, v := range vs {
				r = r.Param(k, v)
			}
		}
		return r, nil
	}
	return &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			out := &unstructured.UnstructuredList{}
			opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue = "", "", listPage, ""
			for {
				r, err := params(rc.Get().AbsPath(path...), opts)
				if err != nil {
					return nil, err
				}
				body, err := r.Do(context.Background()).Raw()
				if err != nil {
					return nil, err
				}
				rv, cont, err := readListPage(body, out)
				if err != nil {
					return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
				}
				if out.GetResourceVersion() == "" {
					out.SetResourceVersion(rv)
				}
				if cont == "" {
					return out, nil
				}
				opts.Continue = cont
			}
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			r, err := params(rc.Get().AbsPath(path...), opts)
			if err != nil {
				return nil, err
			}
			body, err := r.Stream(context.Background())
			if err != nil {
				return nil, err
			}
			return watch.NewStreamWatcher(newWatchDecoder(body),
				apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
		},
	}
}

// readListPage appends the slim items of one list page to out and returns
// the page's resourceVersion and continue token.
func readListPage(body []byte, out *unstructured.UnstructuredList) (rv, cont string, err error) {
	it := wireJSON.BorrowIterator(body)
	defer wireJSON.ReturnIterator(it)
	it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
		switch k {
		case "metadata":
			it.ReadObjectCB(func(it *jsoniter.Iterator, mk string) bool {
				switch mk {
				case "resourceVersion":
					rv = it.ReadString()
				case "continue":
					cont = it.ReadString()
				default:
					it.Skip()
				}
				return true
			})
		case "items":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				u, e := slimFrom(it)
				if e != nil {
					err = e
					return false
				}
				out.Items = append(out.Items, *u)
				return true
			})
		default:
			it.Skip()
		}
		return err == nil
	})
	if err == nil && it.Error != nil && !errors.Is(it.Error, io.EOF) {
		err = it.Error
	}
	return rv, cont, err
}

// watchDecoder reads a watch's stream of events ({"type":..,"object":..},
// one after another) with one streaming reader; it implements
// watch.Decoder for watch.NewStreamWatcher.
type watchDecoder struct {
	body io.ReadCloser
	src  *readErr
	it   *jsoniter.Iterator
}

// readErr keeps the first error its reader returned: the iterator reports
// a cut stream as a syntax error, and watch.StreamWatcher tells a closed
// stream (io.EOF, io.ErrUnexpectedEOF, a closed connection) from a broken
// one by the error itself.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

func newWatchDecoder(body io.ReadCloser) *watchDecoder {
	src := &readErr{r: body}
	return &watchDecoder{body: body, src: src, it: jsoniter.Parse(wireJSON, src, 64<<10)}
}

// Decode returns the next event: its object slim, or a *metav1.Status for
// an ERROR event. At the end of the stream it returns io.EOF; cut inside
// an event, io.ErrUnexpectedEOF; when reading failed, the read's error.
func (d *watchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	if d.it.WhatIsNext() == jsoniter.InvalidValue && d.src.err != nil {
		return "", nil, d.src.err // io.EOF between events: the watch ended
	}
	var typ string
	var raw []byte
	d.it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
		switch k {
		case "type":
			typ = it.ReadString()
		case "object":
			raw = it.SkipAndReturnBytes()
		default:
			it.Skip()
		}
		return true
	})
	if d.it.Error != nil {
		switch {
		case errors.Is(d.src.err, io.EOF):
			return "", nil, io.ErrUnexpectedEOF
		case d.src.err != nil:
			return "", nil, d.src.err
		}
		return "", nil, fmt.Errorf("watch event: %w", d.it.Error)
	}
	switch watch.EventType(typ) {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		u, err := slimFromJSON(raw)
		if err != nil {
			return "", nil, err
		}
		return watch.EventType(typ), u, nil
	case watch.Error:
		st := &metav1.Status{}
		if err := json.Unmarshal(raw, st); err != nil {
			return "", nil, fmt.Errorf("watch ERROR event: %w", err)
		}
		return watch.Error, st, nil
	}
	return "", nil, fmt.Errorf("watch event of unknown type %q", typ)
}

// Close closes the stream.
func (d *watchDecoder) Close() { _ = d.body.Close() }
