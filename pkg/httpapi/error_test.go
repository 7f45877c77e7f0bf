package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/rancher/norman/httperror"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWriteError(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "management.cattle.io", Resource: "settings"}, "x", errors.New("no"))
	cases := []struct {
		name string
		err  error
		want map[string]interface{}
	}{
		{
			name: "a field error of the API",
			err:  httperror.NewFieldAPIError(httperror.InvalidBodyContent, "value", "must be a duration"),
			want: map[string]interface{}{"type": "error", "baseType": "error", "status": 422.0, "code": "InvalidBodyContent", "message": "must be a duration", "fieldName": "value"},
		},
		{
			name: "a wrapped API error without a field",
			err:  fmt.Errorf("plan: %w", httperror.NewAPIError(httperror.MethodNotAllowed, "read-only")),
			want: map[string]interface{}{"type": "error", "baseType": "error", "status": 405.0, "code": "MethodNotAllow", "message": "read-only"},
		},
		{
			name: "the kube-apiserver's refusal keeps its status, reason and message",
			err:  forbidden,
			want: map[string]interface{}{"type": "error", "baseType": "error", "status": 403.0, "code": "Forbidden", "message": forbidden.Error()},
		},
		{
			name: "wrapped, with the caller's context",
			err:  fmt.Errorf("read the Fleet Deployments: %w", forbidden),
			want: map[string]interface{}{"type": "error", "baseType": "error", "status": 403.0, "code": "Forbidden", "message": "read the Fleet Deployments: " + forbidden.Error()},
		},
		{
			name: "anything else is a server error",
			err:  errors.New("boom"),
			want: map[string]interface{}{"type": "error", "baseType": "error", "status": 500.0, "code": "ServerError", "message": "boom"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteError(rec, c.err)
			if rec.Code != int(c.want["status"].(float64)) {
				t.Errorf("status %d, want %v", rec.Code, c.want["status"])
			}
			if ct, cc := rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
				t.Errorf("Content-Type %q, Cache-Control %q", ct, cc)
			}
			var got map[string]interface{}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if len(got) != len(c.want) {
				t.Errorf("body %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s: %v, want %v", k, got[k], v)
				}
			}
		})
	}
}
