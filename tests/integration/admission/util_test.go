package admission_test

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

func dynamicFor(cfg *rest.Config) (dynamic.Interface, error) { return dynamic.NewForConfig(cfg) }
