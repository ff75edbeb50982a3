def greeting(name: str) -> str:
    return f"Helo, {name}!"
