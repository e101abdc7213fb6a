def is_available():
    return False


def synchronize():
    pass
