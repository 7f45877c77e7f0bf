package framework

import (
	"context"
	"fmt"
	"net/http"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What a user may do, as steve works it out from RBAC itself to build the
// user's schemas and each object's links (rancher/steve v0.6.53
// pkg/accesscontrol). steve reads the Roles, ClusterRoles and their
// bindings from its caches; the double reads them with the admin client at
// each request.

// all is steve's wildcard (pkg/accesscontrol/policy_rule_index.go All).
const all = "*"

// access is one grant: a namespace (all: cluster-wide) and an object name
// (all: any) (pkg/accesscontrol/access_set.go Access).
type access struct {
	namespace, name string
}

// grants is Access.Grants: the namespace and the name match, or are all.
func (a access) grants(ns, name string) bool {
	return (a.namespace == all || a.namespace == ns) && (a.name == all || a.name == name)
}

type accessKey struct {
	verb string
	gr   schema.GroupResource
}

// accessSet is pkg/accesscontrol/access_set.go AccessSet (resources only:
// the double serves no non-resource URL).
type accessSet struct {
	set map[accessKey]map[access]bool
}

func (a *accessSet) add(verb string, gr schema.GroupResource, x access) {
	k := accessKey{verb, gr}
	if a.set[k] == nil {
		a.set[k] = map[access]bool{}
	}
	a.set[k][x] = true
}

// accessList is AccessSet.AccessListFor: every grant of verb on gr, with
// the wildcards of the verb, the group and the resource.
func (a *accessSet) accessList(verb string, gr schema.GroupResource) []access {
	var out []access
	seen := map[access]bool{}
	for _, v := range []string{all, verb} {
		for _, g := range []string{all, gr.Group} {
			for _, r := range []string{all, gr.Resource} {
				for x := range a.set[accessKey{v, schema.GroupResource{Group: g, Resource: r}}] {
					if !seen[x] {
						seen[x] = true
						out = append(out, x)
					}
				}
			}
		}
	}
	return out
}

// grants is AccessSet.Grants: whether verb on the object ns/name of gr is
// granted.
func (a *accessSet) grants(verb string, gr schema.GroupResource, ns, name string) bool {
	for _, x := range a.accessList(verb, gr) {
		if x.grants(ns, name) {
			return true
		}
	}
	return false
}

// userSchema is what a user's schema of a type offers, and its access
// list by verb.
type userSchema struct {
	resourceMethods, collectionMethods []string
	byVerb                             map[string][]access
}

// schemaFor is the user's schema of t, as steve pkg/schema/factory.go
// schemasForSubject builds it, or nil when the user gets none (no
// methods): for each verb the resource has (discovery), the grants of it —
// for a cluster-scoped type only the cluster-wide ones; then GET (resource
// and collection) where list or get is granted, DELETE where delete is,
// PUT and PATCH where update is, POST (collection) where create is, and
// PATCH again where patch is (factory.go appends it twice when update and
// patch are both granted; so does the double). A PUT is offered when the
// user may update ANY object of the type, e.g. nine Settings by name.
func (a *accessSet) schemaFor(t *steveType) *userSchema {
	sc := &userSchema{byVerb: map[string][]access{}}
	for _, verb := range t.verbs {
		l := a.accessList(verb, t.gvr.GroupResource())
		if !t.namespaced {
			var cluster []access
			for _, x := range l {
				if x.namespace == all {
					cluster = append(cluster, x)
				}
			}
			l = cluster
		}
		if len(l) > 0 {
			sc.byVerb[verb] = l
		}
	}
	anyVerb := func(verbs ...string) bool {
		for _, v := range verbs {
			if len(sc.byVerb[v]) > 0 {
				return true
			}
		}
		return false
	}
	if anyVerb("list", "get") {
		sc.resourceMethods = append(sc.resourceMethods, http.MethodGet)
		sc.collectionMethods = append(sc.collectionMethods, http.MethodGet)
	}
	if anyVerb("delete") {
		sc.resourceMethods = append(sc.resourceMethods, http.MethodDelete)
	}
	if anyVerb("update") {
		sc.resourceMethods = append(sc.resourceMethods, http.MethodPut, http.MethodPatch)
	}
	if anyVerb("create") {
		sc.collectionMethods = append(sc.collectionMethods, http.MethodPost)
	}
	if anyVerb("patch") {
		sc.resourceMethods = append(sc.resourceMethods, http.MethodPatch)
	}
	if len(sc.resourceMethods) == 0 && len(sc.collectionMethods) == 0 {
		return nil
	}
	return sc
}

// canWatch is steve pkg/accesscontrol/access_control.go CanWatch: any
// grant of watch on the type, else (rancher/apiserver
// pkg/server/access.go) the right to list it by the schema's collection
// methods.
func (sc *userSchema) canWatch() bool {
	return len(sc.byVerb["watch"]) > 0 || contains(sc.collectionMethods, http.MethodGet) || contains(sc.collectionMethods, http.MethodPost)
}

// accessFor is steve pkg/accesscontrol/access_store.go AccessFor: the
// rules of the Roles and ClusterRoles bound to the user by name (a User
// subject, or a ServiceAccount subject whose user name it is:
// policy_rule_index.go indexSubjects) or to one of its groups (a Group
// subject); a RoleBinding grants in its namespace, a ClusterRoleBinding
// (to a ClusterRole only) everywhere (user_grants.go toAccessSet); each
// rule adds, per API group, resource, name (all when it names none) and
// verb, a grant (policy_rule_index.go addResourceAccess, without its
// special case of namespaces, which the double does not serve).
func (s *Steve) accessFor(ctx context.Context, user SteveUser) (*accessSet, error) {
	crbs, err := s.rbac.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("steve double: cluster role bindings: %w", err)
	}
	rbs, err := s.rbac.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("steve double: role bindings: %w", err)
	}
	subject := func(subjects []rbacv1.Subject) bool {
		for _, sub := range subjects {
			switch {
			case sub.APIGroup == rbacv1.GroupName && sub.Kind == rbacv1.UserKind && sub.Name == user.Name:
				return true
			case sub.APIGroup == "" && sub.Kind == rbacv1.ServiceAccountKind && sub.Namespace != "" &&
				"system:serviceaccount:"+sub.Namespace+":"+sub.Name == user.Name: // serviceaccount.MakeUsername
				return true
			case sub.APIGroup == rbacv1.GroupName && sub.Kind == rbacv1.GroupKind && contains(user.Groups, sub.Name):
				return true
			}
		}
		return false
	}
	out := &accessSet{set: map[accessKey]map[access]bool{}}
	addRules := func(ns string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{all}
			}
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					for _, n := range names {
						for _, v := range rule.Verbs {
							out.add(v, schema.GroupResource{Group: g, Resource: r}, access{namespace: ns, name: n})
						}
					}
				}
			}
		}
	}
	for _, b := range crbs.Items {
		if b.RoleRef.Kind != "ClusterRole" || !subject(b.Subjects) {
			continue
		}
		role, err := s.rbac.RbacV1().ClusterRoles().Get(ctx, b.RoleRef.Name, metav1.GetOptions{})
		if err != nil {
			continue // policy_rule_index.go getRules: a missing role grants nothing
		}
		addRules(all, role.Rules)
	}
	for _, b := range rbs.Items {
		if !subject(b.Subjects) {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch b.RoleRef.Kind {
		case "ClusterRole":
			role, err := s.rbac.RbacV1().ClusterRoles().Get(ctx, b.RoleRef.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			rules = role.Rules
		case "Role":
			role, err := s.rbac.RbacV1().Roles(b.Namespace).Get(ctx, b.RoleRef.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			rules = role.Rules
		}
		addRules(b.Namespace, rules)
	}
	return out, nil
}
