from negharness.discovery.hookspecs import hookimpl


@hookimpl
def negharness_register_models(registry):
    registry.add("clip", "negharness_dup:nothing", "a second model called clip")
