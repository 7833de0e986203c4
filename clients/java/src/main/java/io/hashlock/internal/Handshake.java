package io.hashlock.internal;

import java.util.ArrayList;
import java.util.List;

/** The first commands on a new connection: AUTH, SELECT, CLIENT SETNAME. */
public final class Handshake {
    private Handshake() {}

    public static List<List<byte[]>> of(String user, char[] password, int database, String clientName) {
        List<List<byte[]>> cmds = new ArrayList<>(3);
        if (password != null && password.length > 0) {
            List<byte[]> auth = new ArrayList<>(3);
            auth.add(Resp.bytes("AUTH"));
            if (user != null && !user.isEmpty()) auth.add(Resp.bytes(user));
            auth.add(Resp.bytes(new String(password)));
            cmds.add(auth);
        }
        if (database != 0) cmds.add(List.of(Resp.bytes("SELECT"), Resp.bytes(Integer.toString(database))));
        if (clientName != null && !clientName.isEmpty()) {
            cmds.add(List.of(Resp.bytes("CLIENT"), Resp.bytes("SETNAME"), Resp.bytes(clientName)));
        }
        return List.copyOf(cmds);
    }
}
