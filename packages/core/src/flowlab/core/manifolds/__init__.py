"""Riemannian manifolds for geometric flow matching: exp/log maps, projections, uniform and wrapped-normal sources."""

from flowlab.core.manifolds.base import Manifold
from flowlab.core.manifolds.euclidean import Euclidean
from flowlab.core.manifolds.hyperbolic import Lorentz, PoincareBall, lorentz_to_poincare, poincare_to_lorentz
from flowlab.core.manifolds.product import Product
from flowlab.core.manifolds.simplex import Simplex
from flowlab.core.manifolds.sphere import Sphere
from flowlab.core.manifolds.torus import FlatTorus, wrap
from flowlab.core.manifolds.wrapped import WrappedNormal

__all__ = [
    "Euclidean",
    "FlatTorus",
    "Lorentz",
    "Manifold",
    "PoincareBall",
    "Product",
    "Simplex",
    "Sphere",
    "WrappedNormal",
    "lorentz_to_poincare",
    "poincare_to_lorentz",
    "wrap",
]
