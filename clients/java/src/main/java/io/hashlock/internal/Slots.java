package io.hashlock.internal;

/** Redis Cluster's key slot: CRC16 (XMODEM) of the key or its hash tag, mod 16384. */
public final class Slots {
    private Slots() {}

    private static final int[] TABLE = new int[256];

    static {
        for (int i = 0; i < 256; i++) {
            int crc = i << 8;
            for (int j = 0; j < 8; j++) crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
            TABLE[i] = crc & 0xffff;
        }
    }

    public static int of(byte[] key) {
        int start = 0;
        int end = key.length;
        for (int i = 0; i < key.length; i++) {
            if (key[i] == '{') {
                for (int j = i + 1; j < key.length; j++) {
                    if (key[j] == '}') {
                        if (j > i + 1) {
                            start = i + 1;
                            end = j;
                        }
                        break;
                    }
                }
                break;
            }
        }
        int crc = 0;
        for (int i = start; i < end; i++) crc = ((crc << 8) ^ TABLE[((crc >>> 8) ^ key[i]) & 0xff]) & 0xffff;
        return crc & 16383;
    }
}
