package settings

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
)

// restored names a Setting object restore created again, and the value it
// holds (the env's, the user's remembered one, or the default).
type restored struct {
	name, value string
}

// restore keeps the nine Setting objects in place, from inputs (every
// setting's Input, by name): it creates again the ones that were deleted
// (Desired: the env value, else the user's remembered value) and patches
// default, source and value where Desired says. It returns the objects it
// created again, also when it stops at an error (a failed create or
// patch) for the work queue to retry. A create that loses to another
// writer is no error: the next sync reconciles that object.
func (p *Provider) restore(inputs map[string]Input) ([]restored, error) {
	var out []restored
	for _, d := range Registry {
		in := inputs[d.Name]
		if in.Object == nil {
			// Created by an earlier sync that the cache has not shown yet
			// (the syncs of nine delete events follow each other faster
			// than the cache shows the creates): one read of the API
			// server instead of a create it would refuse; created again
			// only when it is gone there too.
			if exists, err := p.stillThere(d.Name); err != nil || exists {
				if err != nil {
					return out, err
				}
				continue
			}
			created, err := p.create(d, in)
			if err != nil {
				return out, err
			}
			if created {
				out = append(out, restored{name: d.Name, value: Resolve(d, in).Value})
			}
			continue
		}
		_, patch := Desired(d, in)
		switch {
		case patch == nil:
		case LeavesEnv(in) && replaceable(in.Object):
			if err := p.replace(in.Object, patch); err != nil {
				return out, err
			}
		default:
			if err := p.patch(d.Name, patch); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// ensureExists creates the Setting object of d when the API server has
// none, with the env value or the user's remembered value. It reads the
// API server, not the cache, because it runs before the cache starts.
func (p *Provider) ensureExists(_ context.Context, d Definition) error {
	_, err := p.opts.Settings.Get(d.Name, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	in := Input{}
	in.Env, in.EnvSet = p.opts.LookupEnv(d.EnvVar())
	p.mu.RLock()
	in.Remembered, in.RememberedSet = p.state.Values[d.Name]
	p.mu.RUnlock()
	_, err = p.create(d, in)
	return err
}

// create creates the Setting object of d as Desired computes it. It
// reports false when another writer created it first (the next sync then
// reconciles it).
func (p *Provider) create(d Definition, in Input) (bool, error) {
	obj, _ := Desired(d, in)
	_, err := p.opts.Settings.Create(obj)
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create setting %s: %w", d.Name, err)
	}
	p.expectCreated(d.Name)
	p.log.Info("setting created", "setting", d.Name, "value", obj.Value, "source", obj.Source)
	return true, nil
}

// expectCreated marks name as created by this provider and not yet shown
// by the cache (input clears it once the cache shows the object).
func (p *Provider) expectCreated(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.created == nil {
		p.created = map[string]bool{}
	}
	p.created[name] = true
}

// stillThere reports whether name, absent from the cache, is an object
// this provider created that the API server still has (read live).
func (p *Provider) stillThere(name string) (bool, error) {
	p.mu.RLock()
	awaited := p.created[name]
	p.mu.RUnlock()
	if !awaited {
		return false, nil
	}
	_, err := p.opts.Settings.Get(name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		p.mu.Lock()
		delete(p.created, name)
		p.mu.Unlock()
		return false, nil
	}
	return false, fmt.Errorf("get setting %s: %w", name, err)
}

// replaceable reports whether restore may delete obj and create it again:
// not when it is being deleted, or carries finalizers or owner references,
// which a new object would not have (their controllers would see it
// deleted). Those are patched, as on Rancher before v2.15.
func replaceable(obj *v3.Setting) bool {
	return obj.DeletionTimestamp == nil && len(obj.Finalizers) == 0 && len(obj.OwnerReferences) == 0
}

// replace writes patch to the Setting obj by deleting obj (only that
// object: its UID and resourceVersion as preconditions) and creating it
// again with the patch applied. rancher-webhook v0.11.0 (Rancher v2.15.0)
// refuses any update that moves a Setting off source "env" (rancher/webhook
// v0.11.0 pkg/resources/management.cattle.io/v3/setting/validator.go,
// admitUpdate) and checks nothing on delete or, for these names, on
// create. A changed or deleted object is left to the next sync.
func (p *Provider) replace(obj *v3.Setting, patch map[string]interface{}) error {
	next := &v3.Setting{Value: obj.Value, Default: obj.Default, Source: obj.Source}
	next.Name, next.Labels, next.Annotations = obj.Name, obj.Labels, obj.Annotations
	for k, v := range patch {
		switch k {
		case "value":
			next.Value = v.(string)
		case "default":
			next.Default = v.(string)
		case "source":
			next.Source = v.(string)
		case "customized":
			next.Customized = v.(bool)
		}
	}
	uid, rv := obj.UID, obj.ResourceVersion
	err := p.opts.Settings.Delete(obj.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // changed or deleted meanwhile: the next sync looks again
	}
	if err != nil {
		return fmt.Errorf("delete setting %s to leave source env: %w", obj.Name, err)
	}
	// A create that fails after the delete is retried here, then by the
	// next sync, which creates the object from the value adoptLeavingEnv
	// remembered.
	err = retry.OnError(retry.DefaultBackoff, func(err error) bool { return !apierrors.IsAlreadyExists(err) }, func() error {
		_, err := p.opts.Settings.Create(next)
		return err
	})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil // another writer made it: the next sync looks at it
	case err != nil:
		return fmt.Errorf("create setting %s again without source env: %w", obj.Name, err)
	}
	p.expectCreated(obj.Name)
	p.log.Info("setting created again without source env", "setting", obj.Name, "value", next.Value)
	return nil
}

// patch applies a JSON merge patch to the Setting called name.
func (p *Provider) patch(name string, patch map[string]interface{}) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := p.opts.Settings.Patch(name, types.MergePatchType, body); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile: the next sync restores it
		}
		return fmt.Errorf("patch setting %s: %w", name, err)
	}
	p.log.Info("setting updated", "setting", name, "patch", string(body))
	return nil
}
