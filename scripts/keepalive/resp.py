# The RESP encoding of one command, for the KEEPALIVE check scripts (raw
# sockets: they need to control exactly when each byte is sent).
def cmd(*a):
    out = b"*%d\r\n" % len(a)
    for x in a:
        x = x.encode() if isinstance(x, str) else x
        out += b"$%d\r\n%s\r\n" % (len(x), x)
    return out
