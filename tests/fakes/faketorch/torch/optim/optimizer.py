_hooks = []


class _Handle:
    def __init__(self, hook):
        self.hook = hook

    def remove(self):
        _hooks.remove(self.hook)


def register_optimizer_step_post_hook(hook):
    _hooks.append(hook)
    return _Handle(hook)
