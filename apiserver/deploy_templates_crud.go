package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// stepsKind is what the handlers of deploy templates and of runbooks
// differ in: both are named lists of steps, alike in Ironic's
// deploy_template.py and runbook.py (a UUID or name in the path, a trait
// as name, steps without duplicates, paging without filters).
type stepsKind[T any] struct {
	what     string // "deploy template": messages
	title    string // "Deploy template": the not-found message
	path     string // "deploy_templates": under /v1/
	res      *resource[T, stepListQuery]
	defaults []string
	blank    func() *T
	uuid     func(*T) string
	name     func(*T) string
	// invalid is the whole object's check after the schema: duplicate
	// steps, worded as Ironic's.
	invalid func(*T) error
	// beforePatch, when set, checks a patch against the stored object and
	// adjusts it before the patch applies (runbooks: owner and public).
	beforePatch func(*T, []patchOp) error
	// checkCreate, when set, checks a create body with the request's
	// version before the table does (runbooks: names below 1.112).
	checkCreate func(minor int, body map[string]any) error

	get    func(st *store.Store, ctx context.Context, ident string) (*T, error)
	list   func(st *store.Store, ctx context.Context, f store.StepListFilter) ([]*T, error)
	create func(st *store.Store, ctx context.Context, obj *T) error
	update func(st *store.Store, ctx context.Context, obj *T) error
	delete func(st *store.Store, ctx context.Context, uuid string) error
}

var templateKind = &stepsKind[deployTemplate]{
	what: "deploy template", title: "Deploy template", path: "deploy_templates",
	res: templateResource, defaults: templateDefaultFields,
	blank: func() *deployTemplate { return &deployTemplate{Extra: map[string]any{}} },
	uuid:  func(t *deployTemplate) string { return t.UUID },
	name:  func(t *deployTemplate) string { return t.Name },
	invalid: func(t *deployTemplate) error {
		steps := make([]userStep, len(t.Steps))
		for i, s := range t.Steps {
			steps[i] = userStep{Interface: s.Interface, Step: s.Step}
		}
		if d := duplicateSteps(steps); d != "" {
			return badRequest("Deploy template invalid: Duplicate deploy steps. A deploy template cannot have multiple deploy steps "+
				"with the same interface and step. Duplicates: %s.", d)
		}
		return nil
	},
	get:    (*store.Store).GetDeployTemplate,
	list:   (*store.Store).ListDeployTemplates,
	create: (*store.Store).CreateDeployTemplate,
	update: (*store.Store).UpdateDeployTemplate,
	delete: (*store.Store).DeleteDeployTemplate,
}

func (k *stepsKind[T]) notFound(ident string) *apiError {
	return errorf(http.StatusNotFound, "%s %s could not be found.", k.title, ident)
}

// load finds the object /v1/{path}/{ident} names, by UUID or name.
func (k *stepsKind[T]) load(s *server, c *gin.Context) (*T, error) {
	ident := c.Param("ident")
	obj, err := k.get(s.store, c.Request.Context(), ident)
	if errors.Is(err, store.ErrNotFound) {
		return nil, k.notFound(ident)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", k.what, ident, err)
	}
	return obj, nil
}

func (k *stepsKind[T]) show(s *server) handler {
	return func(c *gin.Context) error {
		return showOne(s, c, k.res, func(c *gin.Context) (*T, error) { return k.load(s, c) })
	}
}

// writeError words the store's conflicts as Ironic's
// DeployTemplateDuplicateName / RunbookDuplicateName and
// ...AlreadyExists (409).
func (k *stepsKind[T]) writeError(err error, obj *T) error {
	switch {
	case errors.Is(err, store.ErrDuplicateName):
		return errorf(http.StatusConflict, "A %s with name %s already exists.", k.what, k.name(obj))
	case errors.Is(err, store.ErrDuplicateUUID):
		return errorf(http.StatusConflict, "A %s with UUID %s already exists.", k.what, k.uuid(obj))
	case errors.Is(err, store.ErrNotFound):
		return k.notFound(k.uuid(obj))
	}
	return fmt.Errorf("write %s %s: %w", k.what, k.uuid(obj), err)
}

func (k *stepsKind[T]) createHandler(s *server) handler {
	return func(c *gin.Context) error {
		body, err := decodeObject(c)
		if err != nil {
			return err
		}
		if k.checkCreate != nil {
			if err := k.checkCreate(ver(c), body); err != nil {
				return err
			}
		}
		obj := k.blank()
		if _, err := k.res.create(obj, body, ver(c)); err != nil {
			return err
		}
		if err := k.invalid(obj); err != nil {
			return err
		}
		if err := k.create(s.store, c.Request.Context(), obj); err != nil {
			return k.writeError(err, obj)
		}
		c.Header("Location", s.baseURL(c)+"/v1/"+k.path+"/"+k.uuid(obj))
		k.res.writeOne(c, s.baseURL(c), http.StatusCreated, obj, nil)
		return nil
	}
}

func (k *stepsKind[T]) patchHandler(s *server) handler {
	return func(c *gin.Context) error {
		ops, err := k.res.readPatch(c)
		if err != nil {
			return err
		}
		obj, err := k.load(s, c)
		if err != nil {
			return err
		}
		if k.beforePatch != nil {
			if err := k.beforePatch(obj, ops); err != nil {
				return err
			}
		}
		if err := k.res.applyPatch(obj, ops); err != nil {
			return err
		}
		if err := k.invalid(obj); err != nil {
			return err
		}
		if err := k.update(s.store, c.Request.Context(), obj); err != nil {
			return k.writeError(err, obj)
		}
		k.res.writeOne(c, s.baseURL(c), http.StatusOK, obj, nil)
		return nil
	}
}

func (k *stepsKind[T]) deleteHandler(s *server) handler {
	return func(c *gin.Context) error {
		obj, err := k.load(s, c)
		if err != nil {
			return err
		}
		if err := k.delete(s.store, c.Request.Context(), k.uuid(obj)); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return k.notFound(c.Param("ident"))
			}
			return fmt.Errorf("delete %s: %w", k.what, err)
		}
		writeEmpty(c, http.StatusNoContent, "")
		return nil
	}
}
