"""Recipes: what one holds (:mod:`.sections`, its keys declared and checked one by one in :mod:`.knobs`), the checks
of keys that contradict each other (:mod:`.checks`) and reading one from YAML plus ``key=value`` overrides
(:mod:`.reading`: :func:`load_recipe`)."""

from hopscotch.retriever.training.recipe.reading import load_recipe, parse_override, recipe_keys
from hopscotch.retriever.training.recipe.sections import Recipe

__all__ = ["Recipe", "load_recipe", "parse_override", "recipe_keys"]
