// Package httpapi holds how the project's HTTP API (pkg/settingsapi's
// /v3/settings, Rancher-compatible) answers errors: in Rancher's error
// shape.
package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/rancher/norman/httperror"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Error is Rancher's error shape, the JSON body of every error answer of
// Rancher's /v3 API (norman's httperror.APIError as norman's API server
// writes it): Type and BaseType are "error", Status the HTTP status, Code
// the error code (httperror's, e.g. "InvalidBodyContent", or the
// kube-apiserver's reason, e.g. "Forbidden"), FieldName the input field at
// fault, when one is.
type Error struct {
	Type      string `json:"type"`
	BaseType  string `json:"baseType"`
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	FieldName string `json:"fieldName,omitempty"`
}

// ErrorOf returns the answer to err:
//   - an *httperror.APIError (also wrapped) keeps its code, status,
//     message and field name;
//   - an error of the kube-apiserver (apierrors.APIStatus, also wrapped,
//     with a status code) keeps its status and its reason as the code
//     (401, 403, 404, 409, a webhook's refusal), with err's whole message,
//     so the context a caller wrapped it in stays;
//   - any other error is 500 ServerError with err's message.
func ErrorOf(err error) Error {
	var ae *httperror.APIError
	if !errors.As(err, &ae) {
		var se apierrors.APIStatus
		if errors.As(err, &se) && se.Status().Code != 0 {
			st := se.Status()
			ae = &httperror.APIError{Code: httperror.ErrorCode{Code: string(st.Reason), Status: int(st.Code)}, Message: err.Error()}
		} else {
			ae = &httperror.APIError{Code: httperror.ServerError, Message: err.Error()}
		}
	}
	return Error{Type: "error", BaseType: "error", Status: ae.Code.Status, Code: ae.Code.Code, Message: ae.Message, FieldName: ae.FieldName}
}

// WriteError answers err as ErrorOf says, as JSON with the status of the
// error and Cache-Control: no-store (an error answers one request only).
// A failure to write the answer (the client went away) is not reported:
// there is no one left to tell.
func WriteError(w http.ResponseWriter, err error) {
	e := ErrorOf(err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e)
}
