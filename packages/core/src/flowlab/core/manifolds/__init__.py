"""Riemannian manifolds for geometric flow matching: exp/log maps, projections, uniform and wrapped-normal sources."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.manifolds.base": ["Manifold"],
        "flowlab.core.manifolds.euclidean": ["Euclidean"],
        "flowlab.core.manifolds.hyperbolic": ["Lorentz", "PoincareBall", "lorentz_to_poincare", "poincare_to_lorentz"],
        "flowlab.core.manifolds.product": ["Product"],
        "flowlab.core.manifolds.simplex": ["Simplex"],
        "flowlab.core.manifolds.sphere": ["Sphere"],
        "flowlab.core.manifolds.torus": ["FlatTorus", "wrap"],
        "flowlab.core.manifolds.wrapped": ["WrappedNormal"],
    },
)
